"""Checkpoints: exact failover and failback, rewinding groups, safe group offset sync."""

from __future__ import annotations

import itertools
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.mm2.records import Checkpoint
from srm.offsets.api import Translator
from srm.offsets.checkpoint_store import read_checkpoints
from srm.offsets.checkpointing import CheckpointPass
from srm.offsets.group_sync import sync_group_offsets
from srm.offsets.groups import group_offsets
from srm.storage.warehouse import CHECKPOINT_METRICS
from tests.checkpointing import commit, read_from
from tests.helpers import produce
from tests.integration.test_replicate_copy import alter_topic
from tests.replication import Env, contents, make_env, produce_transactions, replicate, sequenced

pytestmark = pytest.mark.integration


def checkpoints_of(env: Env, group: str) -> dict[tuple[str, int], Checkpoint]:
    topic = env.flow().policy.checkpoints_topic(env.west.alias)
    return {(c.topic, c.partition): c for c in read_checkpoints(env.east, topic).values() if c.group == group}


def failover_exactness(env: Env, group: str, topic: str, committed: dict[int, int]) -> None:
    """A consumer on the target starting from the checkpoints reads exactly what the group had not read."""
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    source = contents(env.west, topic)
    checkpoints = checkpoints_of(env, group)
    for partition, upstream in committed.items():
        unread = [r[:4] for r in source[partition] if r[4] >= upstream]
        if not source[partition]:
            assert (remote, partition) not in checkpoints  # nothing copied: no checkpoint
            continue
        downstream = checkpoints[(remote, partition)].downstream_offset
        assert read_from(env.east, remote, partition, downstream) == unread, f"{topic}[{partition}] from {upstream}"


def test_planned_failover_is_exact_on_plain_transactional_and_compacted_topics(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:

    plain, txn, compacted = unique("fo-plain"), unique("fo-txn"), unique("fo-compact")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [plain, txn, compacted]}])
    admin = clients.admin_client(env.west)
    ensure_topic(admin, plain, 10)
    produce(env.west, plain, sequenced(10, 2000))
    ensure_topic(admin, txn, 3)
    batches = [sequenced(3, 15, start=i * 15) for i in range(20)]
    produce_transactions(env.west, txn, batches, {i for i in range(20) if i % 10 in (2, 5, 8)}, unique("fo-txn"))
    ensure_topic(
        admin,
        compacted,
        1,
        config={
            "cleanup.policy": "compact",
            "segment.ms": "100",
            "min.cleanable.dirty.ratio": "0.001",
            "delete.retention.ms": "0",
        },
    )
    produce(env.west, compacted, [{"key": f"k{i}".encode(), "value": b"v1", "partition": 0} for i in range(40)])
    produce(env.west, compacted, [{"key": f"k{i}".encode(), "value": b"v2", "partition": 0} for i in range(0, 40, 2)])
    deadline = time.monotonic() + 60
    while 0 in [r[4] for r in contents(env.west, compacted)[0]]:
        assert time.monotonic() < deadline, "the broker did not compact the topic within 60 s"
        produce(env.west, compacted, [{"key": b"roll", "value": b"x", "partition": 0}])
        time.sleep(1)
    alter_topic(admin, compacted, {"segment.ms": "604800000", "min.cleanable.dirty.ratio": "0.9"})
    replicate(spark, env)

    group = unique("app")
    rng = random.Random(7)
    positions: dict[str, dict[int, int]] = {}
    for topic in (plain, txn, compacted):
        parts = contents(env.west, topic)
        # Any position: a record's offset, the end, 0, or an offset inside a gap (aborts, markers, compaction).
        positions[topic] = {
            p: rng.choice([0, records[-1][4] + 1, *[r[4] for r in records], records[-1][4] // 2])
            for p, records in parts.items()
        }
    commit(env.west, group, {(t, p): o for t, parts in positions.items() for p, o in parts.items()})
    report = CheckpointPass(env.config, env.flow()).run()
    assert report.forward.groups == 1 and len(report.forward.written) == 14
    for topic in (plain, txn, compacted):
        failover_exactness(env, group, topic, positions[topic])


def test_lagging_group_rewinds_and_restarts_stay_monotonic(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("lag")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 10)
    records = [r for r in sequenced(10, 1000) if r["partition"] != 9]  # partition 9 stays empty
    produce(env.west, topic, records)
    replicate(spark, env)
    group = unique("lagger")
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)

    def at(share: float) -> dict[tuple[str, int], int]:
        return {(topic, p): int(100 * share) if p < 9 else 0 for p in range(10)}

    commit(env.west, group, at(0.9))
    CheckpointPass(env.config, env.flow()).run()
    high = {k: c.downstream_offset for k, c in checkpoints_of(env, group).items()}
    assert sorted(high) == [(remote, p) for p in range(9)]  # none for the partition never copied
    commit(env.west, group, at(0.1))
    CheckpointPass(env.config, env.flow()).run()
    low = {k: c.downstream_offset for k, c in checkpoints_of(env, group).items()}
    assert all(low[k] < high[k] for k in high)  # the group rewound: checkpoints follow it back
    restarted = CheckpointPass(env.config, env.flow()).run()  # a new job reloads the checkpoints
    assert restarted.forward.written == [] and restarted.forward.unchanged == 9
    commit(env.west, group, at(0.5))
    CheckpointPass(env.config, env.flow()).run()
    mid = {k: c.downstream_offset for k, c in checkpoints_of(env, group).items()}
    assert all(low[k] < mid[k] < high[k] for k in high)
    failover_exactness(env, group, topic, {p: o for (_, p), o in at(0.5).items()})
    by_group = Translator(env.config, env.flow()).group(group)  # from the checkpoints: works without the source
    assert {(t.topic, t.partition): t.offset for t in by_group} == mid
    assert all(t.from_topic == topic and t.from_offset == 50 for t in by_group)
    metrics = [m for m in env.warehouse.read(CHECKPOINT_METRICS, group=group) if m["direction"] == "forward"]
    assert len(metrics) == 4 * 9 and all(m["upstream_lag"] == 100 - m["upstream_offset"] for m in metrics)
    assert all(m["latency_ms"] >= 0 for m in metrics)
    empty = Translator(env.config, env.flow()).offset(topic, 9, 0)
    assert (empty.topic, empty.partition, empty.offset) == (remote, 9, 0)  # an empty partition translates to 0
    other = unique("other")
    commit(env.west, other, at(0.1))
    both = Translator(env.config, env.flow()).groups([group, other, group], live=True)  # one read for all
    assert list(both) == [group, other]
    for name, share in ((group, 0.5), (other, 0.1)):
        assert both[name] == Translator(env.config, env.flow()).group(name, live=True)
        assert [(t.partition, t.from_offset, t.group) for t in both[name]] == [
            (p, o, name) for (_, p), o in sorted(at(share).items())
        ]
    assert both[other][9].offset == 0  # never copied: the end of its remote partition, read once for all groups


def test_checkpoint_records_have_the_mm2_layout(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    import struct

    from tests.helpers import read_all

    topic = unique("layout")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 1)
    produce(env.west, topic, sequenced(1, 10))
    replicate(spark, env)
    group = unique("layout-group")
    commit(env.west, group, {(topic, 0): 4})
    CheckpointPass(env.config, env.flow()).run()
    messages = read_all(env.east, env.flow().policy.checkpoints_topic(env.west.alias), 1)
    raw = next(m for m in messages if Checkpoint.from_message(m).group == group)
    remote = f"{env.west.alias}.{topic}".encode()
    key = (
        struct.pack(">h", len(group)) + group.encode() + struct.pack(">h", len(remote)) + remote + struct.pack(">i", 0)
    )
    assert raw.key() == key and raw.partition() == 0
    assert raw.value() == struct.pack(">hqqh", 0, 4, 4, 0)  # version 0, upstream 4, downstream 4, metadata ""


class JoinLeave(threading.Thread):
    """A consumer of ``group`` on the target that joins, reads a few records, commits, leaves, again."""

    def __init__(self, cluster: Any, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.group, self.topic = cluster, group, topic
        self.active: list[tuple[float, float]] = []  # (joined, left) monotonic times
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            consumer = clients.consumer(self.cluster, self.group, **{"auto.offset.reset": "earliest"})
            consumer.subscribe([self.topic])
            joined = None
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and joined is None:
                if consumer.consume(20, 0.1):  # a few records per visit: the sync often gets ahead of it
                    joined = time.monotonic()
            time.sleep(0.3)
            if joined is not None:
                consumer.commit(asynchronous=False)  # its own position, past what the sync wrote
            consumer.close()
            if joined is not None:
                self.active.append((joined, time.monotonic()))
            time.sleep(0.3)


# Between two rounds of sync_rounds: 100 rounds then span several of JoinLeave's visits (each up to
# ~4 s). Unpaced, 100 rounds took ~1.5 s here, which could all fall into the consumer's first join,
# so the sync never saw the group idle.
ROUND_PAUSE_S = 0.08


def sync_rounds(admin: Any, checkpoints: list[Checkpoint], group: str, rounds: int) -> tuple[list[float], list[dict]]:
    """``rounds`` rounds of offset sync while the source group keeps moving; write times and offsets seen."""
    writes: list[float] = []
    seen: list[dict[tuple[str, int], int]] = []
    for round_ in range(rounds):
        moving = [
            Checkpoint(
                c.group,
                c.topic,
                c.partition,
                c.upstream_offset + 5 * round_,
                min(c.downstream_offset + 5 * round_, 1000),
            )
            for c in checkpoints
        ]
        if group in sync_group_offsets(admin, moving).synced:
            writes.append(time.monotonic())
        seen.append({k: v.offset for k, v in group_offsets(admin, [group])[group].offsets.items()})
        time.sleep(ROUND_PAUSE_S)
    return writes, seen


def test_group_offset_sync_exact_and_never_while_active_or_backwards(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("sync")
    env = make_env(
        kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "sync.group.offsets.enabled": True}]
    )
    ensure_topic(clients.admin_client(env.west), topic, 4)
    produce(env.west, topic, sequenced(4, 4000))
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    idle, busy = unique("idle"), unique("busy")
    commit(env.west, idle, {(topic, p): 300 + 100 * p for p in range(4)})
    commit(env.west, busy, {(topic, p): 300 + 100 * p for p in range(4)})
    report = CheckpointPass(env.config, env.flow()).run()
    target_admin = clients.admin_client(env.east)
    expected = {(remote, p): checkpoints_of(env, idle)[(remote, p)].downstream_offset for p in range(4)}
    assert report.sync is not None and report.sync.synced[idle] == expected  # the idle group: exact offsets
    assert {k: v.offset for k, v in group_offsets(target_admin, [idle])[idle].offsets.items()} == expected

    consumer = JoinLeave(env.east, busy, remote)
    consumer.start()
    checkpoints = list(checkpoints_of(env, busy).values())
    writes, seen = sync_rounds(target_admin, checkpoints, busy, 100)
    consumer.halt.set()
    consumer.join(30)
    assert consumer.active, "the consumer never got an assignment"
    assert writes, "the sync never found the group idle and behind: the test proves nothing"
    assert len(writes) < 100, "the sync never found the group active: the test proves nothing"
    for earlier, later in itertools.pairwise(seen):
        assert all(later.get(k, -1) >= v for k, v in earlier.items()), "an offset moved backwards"
    for written in writes:
        assert not any(start < written < end for start, end in consumer.active), "written while the group was active"


def test_failback_after_consuming_more_on_the_target_is_exact(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("failback")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 3)
    produce(env.west, topic, sequenced(3, 900))
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    group = unique("roamer")
    commit(env.west, group, {(topic, p): 50 * (p + 1) for p in range(3)})
    CheckpointPass(env.config, env.flow()).run()
    # Failover: the group continues on the target from its checkpoints and consumes 70 more per partition.
    on_target = {(remote, p): c.downstream_offset + 70 for (_, p), c in checkpoints_of(env, group).items()}
    commit(env.east, group, on_target)
    produce(env.west, topic, sequenced(3, 90, start=900))  # more data meanwhile, replicated too
    replicate(spark, env)
    CheckpointPass(env.config, env.flow()).run()
    # Failback: the checkpoints on the source (`<target>.checkpoints.internal`) say where to resume.
    back_topic = env.flow().policy.checkpoints_topic(env.east.alias)
    back = {(c.topic, c.partition): c for c in read_checkpoints(env.west, back_topic).values() if c.group == group}
    assert sorted(back) == [(topic, p) for p in range(3)]
    for p in range(3):
        consumed_on_target = read_from(env.east, remote, p, 0)[: on_target[(remote, p)]]
        resumed = read_from(env.west, topic, p, back[(topic, p)].downstream_offset)
        everything = read_from(env.west, topic, p, 0)
        # Resuming on the source reads exactly what was not consumed on the target.
        assert resumed == everything[len(consumed_on_target) :]
        translated = Translator(env.config, env.flow()).offset(remote, p, on_target[(remote, p)], "backward")
        assert (translated.topic, translated.offset) == (topic, back[(topic, p)].downstream_offset)
