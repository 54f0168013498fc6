"""The copy itself: identical partitions, compacted and transactional sources, exact offset runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.internal_topics import history_topic_name
from srm.kafka.partitions import read_to_end
from srm.kafka.topics import describe_topic_configs, ensure_topic
from srm.mm2.records import OffsetRunsRecord, OffsetSync, is_opener
from srm.storage.warehouse import METRICS, SYNC_HISTORY
from tests.helpers import produce, read_all
from tests.replication import (
    Env,
    as_row,
    contents,
    make_env,
    produce_transactions,
    replicate,
    seq_of,
    sequence_report,
    sequenced,
    without_offsets,
)

pytestmark = pytest.mark.integration


def alter_topic(admin: Any, topic: str, settings: dict[str, str]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(30)


def check_runs(env: Env, topic: str, source: dict[int, list[Any]], target: dict[int, list[Any]]) -> int:
    """Every history run pairs identical records; returns how many runs there were."""
    history = [run for run in env.warehouse.read(SYNC_HISTORY, topic=topic) if run["length"] > 0]
    for run in history:
        by_offset_source = {r[4]: r[:4] for r in source[run["partition"]]}
        by_offset_target = {r[4]: r[:4] for r in target[run["partition"]]}
        for i in range(run["length"]):
            assert by_offset_source[run["source_first"] + i] == by_offset_target[run["target_first"] + i]
    covered = sum(run["length"] for run in history)
    assert covered == sum(len(records) for records in source.values()), "runs do not cover every record"
    return len(history)


def test_ten_partitions_identical_per_partition(spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Any) -> None:
    topic = unique("orders")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 10)
    records = sequenced(10, 10_000)
    produce(env.west, topic, records)
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    source, target = contents(env.west, topic), contents(env.east, remote)
    assert without_offsets(target) == without_offsets(source)  # order, bytes, headers, timestamps
    expected = {p: [s for s in range(10_000) if s % 10 == p] for p in range(10)}
    assert sequence_report(target, expected) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    assert sum(1 for r in records if r["value"] is None) == sum(1 for p in target.values() for r in p if r[1] is None)
    assert check_runs(env, topic, source, target) >= 10
    # Each transaction put the history's partition in with its first record: an opener, without
    # runs, restating a position of that record's partition no later than the transaction's own.
    # The warehouse holds the history without them.
    reader = clients.reader(env.east, unique("history-reader"))
    try:
        history = [
            (is_opener(m), OffsetRunsRecord.from_message(m))
            for m in read_to_end(reader, history_topic_name(env.flow()))
        ]
    finally:
        reader.close()
    openers = [r for opener, r in history if opener]
    written = [r for opener, r in history if not opener]
    reached: dict[tuple[str, int], int] = {}
    for r in written:
        reached[(r.topic, r.partition)] = max(r.next_offset, reached.get((r.topic, r.partition), 0))
    assert openers and not any(r.runs for r in openers)
    assert all(r.next_offset <= reached[(r.topic, r.partition)] for r in openers)
    mine = [r for r in written if r.topic == topic]
    assert len(env.warehouse.read(SYNC_HISTORY, topic=topic)) == sum(max(len(r.runs), 1) for r in mine)
    metrics = env.warehouse.read(METRICS, topic=topic)
    assert sum(m["records"] for m in metrics) == 10_000
    assert {m["partition"] for m in metrics} == set(range(10))
    assert all(m["lag"] == 0 and m["next_offset"] == 1000 for m in metrics)


def test_mm2_offset_syncs_are_written_on_the_source(spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Any) -> None:
    topic = unique("syncs")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "offset.lag.max": 10}])
    ensure_topic(clients.admin_client(env.west), topic, 2)
    produce(env.west, topic, sequenced(2, 200))
    replicate(spark, env)
    flow = env.flow()
    syncs_topic = flow.policy.offset_syncs_topic(env.east.alias)
    syncs = [OffsetSync.from_message(m) for m in read_all(env.west, syncs_topic, 20)]
    mine = [s for s in syncs if s.topic == topic]
    assert {s.partition for s in mine} == {0, 1}
    for sync in mine:  # one run per partition: upstream = downstream
        assert sync.downstream_offset == sync.upstream_offset
    # MM2's pace: the first record, then each one offset.lag.max (10) past the last sync + 1
    assert sorted((s.partition, s.upstream_offset) for s in mine) == [(p, o) for p in (0, 1) for o in range(0, 100, 11)]


def test_remote_topic_gets_source_configs_except_excluded(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Any
) -> None:
    topic = unique("configs")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    configs = {
        "retention.ms": "3600000",
        "max.message.bytes": "2000000",
        "cleanup.policy": "compact",
        "min.insync.replicas": "1",
        "message.timestamp.type": "LogAppendTime",
    }
    ensure_topic(clients.admin_client(env.west), topic, 3, config=configs)
    produce(env.west, topic, [{"key": b"k", "value": b"v", "partition": 0}])
    replicate(spark, env)
    remote = describe_topic_configs(
        clients.admin_client(env.east), env.flow().policy.format_remote_topic(env.west.alias, topic)
    )
    assert remote["retention.ms"] == "3600000"
    assert remote["max.message.bytes"] == "2000000"
    assert remote["cleanup.policy"] == "compact"
    assert remote["message.timestamp.type"] == "CreateTime"  # excluded: the target keeps source timestamps
    assert remote["min.insync.replicas"] == "1"  # excluded; equals the broker default anyway


def test_only_committed_transactions_are_copied(spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Any) -> None:
    topic = unique("txn")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 3)
    batches = [sequenced(3, 25, start=25 * txn) for txn in range(40)]
    aborted = {txn for txn in range(40) if txn % 10 in (1, 4, 7)}  # 30% of transactions aborted
    done = produce_transactions(env.west, topic, batches, aborted, unique("txn-producer"))
    committed: dict[int, list[int]] = {p: [] for p in range(3)}
    for record in (r for txn in sorted(done) for r in batches[txn]):
        committed[record["partition"]].append(seq_of(as_row(record)))
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    source, target = contents(env.west, topic), contents(env.east, remote)
    assert without_offsets(target) == without_offsets(source)
    assert sequence_report(target, committed) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    assert sum(len(v) for v in target.values()) == 25 * len(done) >= 25 * 20
    # Source offsets have gaps (aborted records and commit markers): the runs still pair exactly.
    assert check_runs(env, topic, source, target) > 3


def test_compacted_source_with_offset_gaps(spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Any) -> None:
    import time

    topic = unique("compacted")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    settings = {
        "cleanup.policy": "compact",
        "segment.ms": "100",
        "min.cleanable.dirty.ratio": "0.001",
        "delete.retention.ms": "0",
        "min.compaction.lag.ms": "0",
    }
    admin = clients.admin_client(env.west)
    ensure_topic(admin, topic, 1, config=settings)
    # 40 keys, then the even ones again: compaction removes the even keys' first records, so the
    # partition keeps offsets 1, 3, 5, ..., 39 and 40..59, a gap before every odd record.
    first = [{"key": f"k{i}".encode(), "value": f"first-{i}".encode(), "partition": 0} for i in range(40)]
    second = [{"key": f"k{i}".encode(), "value": f"second-{i}".encode(), "partition": 0} for i in range(0, 40, 2)]
    produce(env.west, topic, first)
    produce(env.west, topic, second)
    deadline = time.monotonic() + 60
    while 0 in [r[4] for r in contents(env.west, topic)[0]]:  # until the cleaner has run
        if time.monotonic() > deadline:
            pytest.fail("the broker did not compact the topic within 60 s")
        produce(env.west, topic, [{"key": b"roll", "value": b"x", "partition": 0}])  # rolls a segment
        time.sleep(1)
    # Stop compacting so source and target can be compared record by record.
    alter_topic(admin, topic, {"segment.ms": "604800000", "min.cleanable.dirty.ratio": "0.9"})
    time.sleep(2)
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    source, target = contents(env.west, topic), contents(env.east, remote)
    assert [r[4] for r in source[0]][:3] == [1, 3, 5]
    assert without_offsets(target) == without_offsets(source)
    assert [r[4] for r in target[0]] == list(range(len(target[0])))  # the target has no gaps of its own
    assert check_runs(env, topic, source, target) >= 20  # every compaction gap starts a new run
