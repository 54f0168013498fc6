"""Topic administration on one cluster: idempotent creation, listing, record counts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from srm.errors import SrmError

ADMIN_TIMEOUT_S = 30.0  # a metadata request on a healthy cluster takes milliseconds; allow for elections


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    records: int  # sum over partitions of (high watermark - low watermark): what a reader can still read

    def __str__(self) -> str:
        return f"{self.name} ({self.partitions} partitions, {self.records} records)"


def ensure_topic(
    admin: Any, name: str, partitions: int, replication_factor: int = 1, config: dict[str, str] | None = None
) -> bool:
    """Create ``name`` unless it exists; True if it was created. Other failures name the topic."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=config or {})
    future = admin.create_topics([topic], operation_timeout=ADMIN_TIMEOUT_S)[name]
    try:
        future.result(timeout=ADMIN_TIMEOUT_S)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise SrmError(f"cannot create topic {name!r}: {exc.args[0].str()}") from None
    return True


def partition_counts(admin: Any, include_internal: bool = False) -> dict[str, int]:
    """Topic name -> partition count."""
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    return {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if include_internal or not name.startswith("__")
    }


def watermarks(consumer: Any, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
    """Partition -> (low, high) watermark offsets."""
    from confluent_kafka import TopicPartition

    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=ADMIN_TIMEOUT_S, cached=False)
        for p in range(partitions)
    }


def describe(admin: Any, consumer: Any, include_internal: bool = False) -> list[TopicInfo]:
    """Every topic with its partition and record counts, sorted by name."""
    infos = []
    for name, count in sorted(partition_counts(admin, include_internal).items()):
        marks = watermarks(consumer, name, count)
        infos.append(TopicInfo(name, count, sum(high - low for low, high in marks.values())))
    return infos
