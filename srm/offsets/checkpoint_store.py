"""Checkpoints in MM2's topic: reading the latest per key, the monotonic rule, writing.

``<source>.checkpoints.internal`` on the target is compacted and keyed by (group, downstream
topic, partition); its latest records are the checkpoints in force. They are read at every pass,
so the monotonic rule holds across restarts: per key the downstream offset never decreases unless
the source group itself moved back.
"""

from __future__ import annotations

import logging
from typing import Any

from srm.config.model import Cluster
from srm.errors import RecordFormatError, SrmError
from srm.kafka import clients
from srm.kafka.partitions import read_to_end
from srm.kafka.topics import partition_counts
from srm.mm2.records import Checkpoint

log = logging.getLogger(__name__)
CheckpointKey = tuple[str, str, int]  # group, downstream topic, partition
READ_TIMEOUT_S = 120.0


def read_checkpoints(cluster: Cluster, topic: str) -> dict[CheckpointKey, Checkpoint]:
    """The latest checkpoint per key in ``topic`` (empty if the topic does not exist yet)."""
    if topic not in partition_counts(clients.admin_client(cluster), include_internal=True):
        return {}
    consumer = clients.reader(cluster, "__srm.checkpoint-reader")
    latest: dict[CheckpointKey, Checkpoint] = {}
    try:
        for message in read_to_end(consumer, topic, 0, READ_TIMEOUT_S):
            if message.value() is None:  # a tombstone removes the key
                continue
            try:
                checkpoint = Checkpoint.from_message(message)
            except RecordFormatError as exc:  # one bad record must not stop checkpointing
                log.error("skipping %s", exc)
                continue
            latest[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
    finally:
        consumer.close()
    return latest


def monotonic(new: Checkpoint, previous: Checkpoint | None) -> Checkpoint | None:
    """The checkpoint to write for ``new`` given the one in force, or None when nothing changed."""
    if previous is None or new.upstream_offset < previous.upstream_offset:  # first, or the group rewound
        return new
    downstream = max(new.downstream_offset, previous.downstream_offset)
    candidate = Checkpoint(new.group, new.topic, new.partition, new.upstream_offset, downstream, new.metadata)
    return None if candidate == previous else candidate


def write_checkpoints(cluster: Cluster, topic: str, checkpoints: list[Checkpoint], producer: Any = None) -> None:
    own = producer is None
    producer = producer or clients.producer(cluster, **{"enable.idempotence": True})
    for checkpoint in checkpoints:
        while True:
            try:
                producer.produce(topic, **checkpoint.as_produce_kwargs())
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(60):
        raise SrmError(f"checkpoints to {topic} on {cluster.alias} were not acknowledged within 60 s")
    if own:
        producer.close()
