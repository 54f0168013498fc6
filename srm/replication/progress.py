"""Replication progress: where the copy of each source partition stands, stored on the target.

Progress is a consumer-group offset on the target cluster, committed with
``send_offsets_to_transaction`` in the same Kafka transaction as the records it covers, so the
target can never hold records its progress does not count, or count records it does not hold.
The group is ``__srm.replicate.<source>`` (the ``__`` prefix keeps it out of every flow's group
filter); the key is the remote topic-partition; the offset is the next *source* offset to copy;
the commit metadata carries the source topic id, which changes when a topic is recreated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from srm.config.model import Cluster
from srm.retry import retrying

METADATA_PREFIX = "srm1:"


def progress_group(source: str) -> str:
    return f"__srm.replicate.{source}"


@dataclass(frozen=True)
class Progress:
    next_offset: int
    topic_id: str  # "" when unknown (committed by an older writer)


def encode_metadata(topic_id: str) -> str:
    return METADATA_PREFIX + topic_id


def decode_metadata(metadata: str | None) -> str:
    if metadata and metadata.startswith(METADATA_PREFIX):
        return metadata[len(METADATA_PREFIX) :]
    return ""


def read_progress(
    consumer: Any, partitions: list[tuple[str, int]], timeout_s: float = 30.0
) -> dict[tuple[str, int], Progress]:
    """Committed progress of target topic-partitions, waiting for pending transactions to settle.

    ``consumer`` is a target-cluster consumer of the progress group with read_committed isolation,
    which makes librdkafka ask for stable offsets (KIP-447).
    """
    from confluent_kafka import TopicPartition

    if not partitions:
        return {}
    request = [TopicPartition(t, p) for t, p in partitions]
    committed = retrying(lambda: consumer.committed(request, timeout=timeout_s), "cannot read replication progress")
    return {
        (tp.topic, tp.partition): Progress(tp.offset, decode_metadata(tp.metadata))
        for tp in committed
        if tp.offset >= 0
    }


def read_group_progress(
    cluster: Cluster, group: str, partitions: list[tuple[str, int]], *, stable: bool = True
) -> dict[tuple[str, int], Progress]:
    """Committed progress of ``partitions`` in ``group`` on ``cluster`` (driver side).

    ``stable`` waits for pending transactions of the group to settle (KIP-447); a killed job's open
    transaction keeps offsets pending until its transactional id is fenced or it times out, so
    ``stable=False`` is for questions the last committed progress answers (does any exist?).

    Reads through a consumer rather than ``AdminClient.list_consumer_group_offsets``: in
    librdkafka 2.16 the admin call dereferences a null group handle when the broker answers
    NOT_COORDINATOR (librdkafka issue #5040), which kills the process on a freshly started
    cluster; the consumer's own coordinator lookup handles that answer.
    """
    from srm import clients

    isolation = {} if stable else {"isolation.level": "read_uncommitted"}
    consumer = clients.consumer(cluster, group, **isolation)
    try:
        return read_progress(consumer, partitions)
    finally:
        consumer.close()
