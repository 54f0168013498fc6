"""Helpers for checkpoint and failover tests: commit and read group offsets, a live member, reading a partition."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from srm.config.model import Cluster
from srm.kafka import clients
from srm.kafka.partitions import assign_partitions


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

    consumer = clients.reader(cluster, "srm-test-from")
    assign_partitions(consumer, [TopicPartition(topic, partition, offset)])
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


def committed_on(cluster: Cluster, group: str) -> dict[tuple[str, int], int]:
    """What ``group`` has committed on ``cluster``, per (topic, partition)."""
    from srm.offsets.groups import group_offsets

    found = group_offsets(clients.admin_client(cluster), [group])[group]
    return {k: v.offset for k, v in found.offsets.items()}


@contextmanager
def active_member(cluster: Cluster, group: str, topic: str, committed: int) -> Iterator[None]:
    """While inside, ``group`` has a live member on ``cluster`` that committed ``committed`` on ``topic``[0]."""
    from confluent_kafka import TopicPartition

    consumer = clients.consumer(cluster, group)
    consumer.subscribe([topic])
    try:
        while not consumer.assignment():
            consumer.poll(0.2)
        consumer.commit(offsets=[TopicPartition(topic, 0, committed)], asynchronous=False)
        yield
    finally:
        consumer.close()
