"""The soak's consumer groups: many groups at different positions on the source, and at the end
how exactly each one fails over.

Group ``i`` commits, on every partition of the load, the position ``i * LAG_STEP_S`` seconds of
that partition's records behind its end (refreshed every minute), as consumers that lag by
different amounts do. No group has members: the offsets are written with the admin client.

At the end every group fails over with ``srm-control failover --planned --apply`` and its
position on the target is checked against the source by the records themselves: the first record
at or after the group's source offset and the first at or after its target offset must carry the
same sequence number (0 re-read, 0 skipped), or both be past the partition's end.
"""

from __future__ import annotations

import bisect
from typing import Any

from bench.soak.load import Key, decode
from srm.config.model import Cluster
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.offsets.groups import group_offsets

PREFIX = "soak-group-"
LAG_STEP_S = 1.0


def names(count: int) -> list[str]:
    return [f"{PREFIX}{i:03d}" for i in range(count)]


def commit_positions(source: Cluster, groups: list[str], partitions: list[Key], rate_per_partition: float) -> None:
    """Each group's position on every partition: its lag behind the end, at least the log start."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    admin = clients.admin_client(source)
    ends = list_offsets(admin, partitions, "latest")
    starts = list_offsets(admin, partitions, "earliest")
    requests = []
    for i, group in enumerate(groups):
        lag = int(i * LAG_STEP_S * rate_per_partition)
        offsets = [TopicPartition(t, p, max(starts[(t, p)], ends[(t, p)] - lag)) for t, p in partitions]
        requests.append(ConsumerGroupTopicPartitions(group, offsets))
    # One group per request (the admin API takes one), all of them in flight at once.
    futures = [admin.alter_consumer_group_offsets([request]) for request in requests]
    for request, future in zip(requests, futures, strict=True):
        future[request.group_id].result(60)


def sequences_from(cluster: Cluster, topic: str, partition: int, start: int) -> tuple[list[int], list[int]]:
    """(offsets, sequence numbers) of the partition's records from ``start`` to its end."""
    from confluent_kafka import TopicPartition

    end = list_offsets(clients.admin_client(cluster), [(topic, partition)], "latest")[(topic, partition)]
    consumer = clients.reader(cluster, "soak-failover-check")
    consumer.assign([TopicPartition(topic, partition, start)])
    offsets: list[int] = []
    sequences: list[int] = []
    try:
        done = start >= end
        while not done:
            for message in consumer.consume(10_000, 1.0):
                error = message.error()
                if error is not None:
                    done = done or error.name() == "_PARTITION_EOF"
                    continue
                offsets.append(message.offset())
                sequences.append(decode(message.value()))
                done = done or message.offset() >= end - 1
    finally:
        consumer.close()
    return offsets, sequences


def first_at(offsets: list[int], sequences: list[int], offset: int) -> int | None:
    """The sequence number of the first record at or after ``offset``; None past the end."""
    index = bisect.bisect_left(offsets, offset)
    return sequences[index] if index < len(sequences) else None


def check_failover(source: Cluster, target: Cluster, groups: list[str], remote: dict[str, str]) -> dict[str, Any]:
    """Re-read and skipped records of every group after its failover: by sequence number, per
    partition; ``remote``: source topic -> remote topic."""
    on_source = group_offsets(clients.admin_client(source), groups)
    on_target = group_offsets(clients.admin_client(target), groups)
    pairs: dict[Key, list[tuple[int, int]]] = {}
    missing = 0
    for group in groups:
        for (topic, partition), committed in on_source[group].offsets.items():
            if topic not in remote:
                continue
            moved = on_target[group].offsets.get((remote[topic], partition))
            if moved is None:
                missing += 1
                continue
            pairs.setdefault((topic, partition), []).append((committed.offset, moved.offset))
    re_read = skipped = 0
    for (topic, partition), positions in pairs.items():
        source_side = sequences_from(source, topic, partition, min(u for u, _ in positions))
        target_side = sequences_from(target, remote[topic], partition, min(v for _, v in positions))
        for upstream, downstream in positions:
            a, b = first_at(*source_side, upstream), first_at(*target_side, downstream)
            if a is None or b is None:
                # past the end on one side: the other must be past its end too
                re_read += 0 if b is None else len(_after(target_side, downstream))
                skipped += 0 if a is None else len(_after(source_side, upstream))
            elif b < a:
                re_read += a - b
            elif b > a:
                skipped += b - a
    return {
        "groups": len(groups),
        "partitions": sum(len(v) for v in pairs.values()),
        "missing": missing,
        "re_read": re_read,
        "skipped": skipped,
    }


def _after(side: tuple[list[int], list[int]], offset: int) -> list[int]:
    offsets, sequences = side
    return sequences[bisect.bisect_left(offsets, offset) :]
