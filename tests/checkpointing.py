"""Helpers for checkpoint tests: commit group offsets, read a partition from an offset."""

from __future__ import annotations

import time
from typing import Any

from srm import clients
from srm.config.model import Cluster


def commit(cluster: Cluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit ``offsets`` for ``group`` as a consumer of that group would."""
    from confluent_kafka import TopicPartition

    consumer = clients.consumer(cluster, group)
    try:
        consumer.commit(offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def read_from(
    cluster: Cluster, topic: str, partition: int, offset: int, timeout_s: float = 10.0
) -> list[tuple[Any, ...]]:
    """Records (key, value, headers, timestamp) of one partition from ``offset`` to its end."""
    from confluent_kafka import TopicPartition

    consumer = clients.consumer(cluster, "srm-test-from", **{"enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, partition, offset)])
    out: list[tuple[Any, ...]] = []
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            for m in consumer.consume(10_000, 0.05):
                if m.error() is None:
                    out.append((m.key(), m.value(), m.headers(), m.timestamp()))
                elif m.error().name() == "_PARTITION_EOF":
                    return out
        raise AssertionError(f"no end of {topic}[{partition}] within {timeout_s} s")
    finally:
        consumer.close()
