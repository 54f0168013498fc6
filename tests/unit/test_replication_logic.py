"""Pure logic of the data path: offset runs, plans, slots, config filtering, error extraction."""

from __future__ import annotations

import random

import pytest

from srm.errors import DataLossError, ReplicationError
from srm.mm2.records import OffsetRunsRecord
from srm.mm2.topic_configs import ConfigValue, configs_to_copy
from srm.replication import offsets as plan
from srm.replication.runs import OffsetRun, RunTracker, SyncPacer
from srm.replication.stats import LatencyStats
from srm.spark.failures import user_error


def runs_of(pairs: list[tuple[int, int]]) -> list[tuple[int, int, int]]:
    tracker = RunTracker()
    for source, target in pairs:
        tracker.add(source, target)
    return [(r.source_first, r.target_first, r.length) for r in tracker.finish()]


def test_contiguous_records_make_one_run() -> None:
    assert runs_of([(10, 0), (11, 1), (12, 2)]) == [(10, 0, 3)]


def test_a_gap_on_either_side_starts_a_new_run() -> None:
    # source gap (commit marker at 12), then target gap (our commit marker at 3)
    assert runs_of([(10, 0), (11, 1), (13, 2), (14, 4)]) == [(10, 0, 2), (13, 2, 1), (14, 4, 1)]


def test_offsets_must_increase() -> None:
    tracker = RunTracker()
    tracker.add(5, 5)
    with pytest.raises(ValueError, match="offsets must increase"):
        tracker.add(5, 6)


def test_extend_in_bulk_finds_the_same_runs_as_adding_one_by_one() -> None:
    rng = random.Random(3)
    for _ in range(200):
        pairs, source, target = [], rng.randint(0, 50), rng.randint(0, 50)
        for _ in range(rng.randint(1, 300)):
            pairs.append((source, target))
            source += 1 if rng.random() < 0.9 else rng.randint(2, 5)
            target += 1 if rng.random() < 0.95 else rng.randint(2, 3)
        cut = rng.randint(0, len(pairs))  # two calls: a run may continue across them
        tracker = RunTracker()
        for part in (pairs[:cut], pairs[cut:]):
            tracker.extend([s for s, _ in part], [t for _, t in part])
        assert [(r.source_first, r.target_first, r.length) for r in tracker.finish()] == runs_of(pairs)


def test_extend_rejects_offsets_that_do_not_increase() -> None:
    with pytest.raises(ValueError, match="target offsets must increase"):
        RunTracker().extend([1, 2, 3], [5, 4, 6])
    with pytest.raises(ValueError, match="2 source offsets but 1 target"):
        RunTracker().extend([1, 2], [5])


def test_finish_forgets_and_restarts() -> None:
    tracker = RunTracker()
    tracker.add(0, 0)
    assert tracker.finish() == [OffsetRun(0, 0, 1)]
    assert tracker.finish() == []
    tracker.add(1, 2)
    assert tracker.finish() == [OffsetRun(1, 2, 1)]


def mm2_rule(pairs: list[tuple[int, int]], lag_max: int) -> list[tuple[int, int]]:
    """MM2's per-record rule, written out as Kafka 4.x's OffsetSyncWriter.PartitionState.update."""
    out, last_synced, previous_up, previous_down = [], -1, -1, -1
    for up, down in pairs:
        stale = down - (last_synced + 1) >= lag_max
        if last_synced == -1 or stale or up - previous_up != 1 or down < previous_down:
            out.append((up, down))
            last_synced = down
        previous_up, previous_down = up, down
    return out


def test_offset_syncs_follow_mm2s_rule_and_offset_lag_max() -> None:
    runs = [OffsetRun(10, 0, 2), OffsetRun(13, 2, 1), OffsetRun(14, 4, 5)]
    assert SyncPacer(100).syncs(runs) == [(10, 0), (13, 2)]  # start, then an upstream gap
    assert SyncPacer(0).syncs(runs) == [(u, d) for run in runs for u, d in pairs_of(run)]  # every record
    assert SyncPacer(10).syncs([OffsetRun(0, 0, 100)]) == [(d, d) for d in range(0, 100, 11)]
    assert SyncPacer(5).syncs([]) == []
    pacer = SyncPacer(10)  # state carries over from one transaction to the next
    assert pacer.syncs([OffsetRun(0, 0, 8)]) == [(0, 0)]
    assert pacer.syncs([OffsetRun(8, 9, 8)]) == [(10, 11)]  # a downstream gap alone is not a reason


def test_offset_sync_pacer_equals_the_per_record_rule() -> None:
    import random

    rng = random.Random(7)
    for _ in range(300):
        lag, pacer, up, down, batches = rng.choice([0, 1, 3, 10, 100]), None, 0, 0, []
        for _ in range(rng.randint(1, 4)):
            batch = []
            for _ in range(rng.randint(0, 4)):
                up, down = up + rng.choice([0, 0, 1, 3]), down + rng.choice([0, 1, 2])
                batch.append(OffsetRun(up, down, rng.randint(1, 40)))
                up, down = batch[-1].source_end, batch[-1].target_end
            batches.append(batch)
        pacer = SyncPacer(lag)
        got = [sync for batch in batches for sync in pacer.syncs(batch)]
        assert got == mm2_rule([pair for batch in batches for run in batch for pair in pairs_of(run)], lag)


def pairs_of(run: OffsetRun) -> list[tuple[int, int]]:
    return [(run.source_first + i, run.target_first + i) for i in range(run.length)]


def test_history_record_round_trips() -> None:
    record = OffsetRunsRecord("orders", 3, "AbC", 120, ((100, 50, 10), (111, 61, 9)))
    assert OffsetRunsRecord.decode(record.key(), record.value()) == record
    empty = OffsetRunsRecord("t", 0, "", 0, ())
    assert OffsetRunsRecord.decode(empty.key(), empty.value()).runs == ()


def test_plan_ranges_cover_growth_new_partitions_and_recreated_topics() -> None:
    start = plan.build({("a", 0): 10, ("a", 1): 5, ("b", 0): 7}, {"a": "id-a", "b": "id-b"})
    end = plan.build(
        {("a", 0): 12, ("a", 1): 5, ("a", 2): 3, ("b", 0): 2}, {"a": "id-a", "b": "id-b2"}, initial={("a", 2): 0}
    )
    ranges = plan.ranges(start, end, {"a": "X.a", "b": "X.b"})
    got = {(r.topic, r.partition): (r.start, r.end, r.initial, r.topic_id) for r in ranges}
    assert got == {
        ("a", 0): (10, 12, False, "id-a"),  # grew
        ("a", 2): (0, 3, True, "id-a"),  # first seen: starts at its initial offset
        ("b", 0): (7, 2, False, "id-b2"),  # recreated: scheduled even though its end went down
    }
    assert all(r.target_topic == f"X.{r.topic}" for r in ranges)


def test_plan_initial_partitions_are_scheduled_even_when_empty() -> None:
    start = plan.build({("a", 0): 4}, {"a": "i"}, initial={("a", 0): 4})
    [only] = plan.ranges(start, plan.build({("a", 0): 4}, {"a": "i"}), {"a": "r"})
    assert (only.start, only.end, only.initial) == (4, 4, True)


def test_plans_are_the_same_when_only_initial_markers_differ() -> None:
    a = plan.build({("a", 0): 4}, {"a": "i"}, initial={("a", 0): 0})
    assert plan.same(a, plan.build({("a", 0): 4}, {"a": "i"}))
    assert not plan.same(a, plan.build({("a", 0): 5}, {"a": "i"}))
    assert not plan.same(a, plan.build({("a", 0): 4}, {"a": "j"}))


def test_configs_to_copy_follow_mm2_rules() -> None:
    entries = [
        ConfigValue("retention.ms", "3600000", "DYNAMIC_TOPIC_CONFIG"),
        ConfigValue("cleanup.policy", "compact", "DYNAMIC_TOPIC_CONFIG"),
        ConfigValue("min.insync.replicas", "2", "DYNAMIC_TOPIC_CONFIG"),  # excluded by default
        ConfigValue("segment.bytes", "1073741824", "DEFAULT_CONFIG"),  # a default: target keeps its own
        ConfigValue("compression.type", "zstd", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
        ConfigValue("some.password", "x", "DYNAMIC_TOPIC_CONFIG", sensitive=True),
        ConfigValue("read.only", "x", "DYNAMIC_TOPIC_CONFIG", read_only=True),
    ]
    exclude = (r"min\.insync\.replicas",)
    assert configs_to_copy(entries, exclude) == {"retention.ms": "3600000", "cleanup.policy": "compact"}
    from_source = configs_to_copy(entries, exclude, use_defaults_from="source")
    assert from_source["compression.type"] == "zstd" and from_source["segment.bytes"] == "1073741824"


def test_latency_stats() -> None:
    stats = LatencyStats()
    for value in range(1, 101):  # one record at a time, as in a trickle of small batches
        stats.add_ages(1000.0, [1000 - value])
    summary = stats.summary("latency")
    assert summary == {"latency_min_ms": 1.0, "latency_avg_ms": 50.5, "latency_max_ms": 100.0, "latency_p99_ms": 99.0}
    assert LatencyStats().summary("x")["x_p99_ms"] is None


def test_latency_stats_in_bulk() -> None:
    stats = LatencyStats()
    stats.add_ages(1000.0, [999 - v for v in range(100)])  # ages 1..100
    assert stats.summary("age") == {"age_min_ms": 1.0, "age_avg_ms": 50.5, "age_max_ms": 100.0, "age_p99_ms": 99.0}
    # Past the sample's size the reservoir still follows the distribution: 100,000 ages of 0..999 ms.
    big = LatencyStats()
    for start in range(0, 100_000, 7_000):
        big.add_ages(10_000.0, [10_000 - (v % 1000) for v in range(start, min(start + 7_000, 100_000))])
    assert big.count == 100_000 and big.minimum == 0 and big.maximum == 999
    assert 975 <= (big.percentile(99) or 0) <= 999
    assert 450 <= (big.percentile(50) or 0) <= 550


def test_latency_sample_is_spread_evenly_over_batches_of_any_size() -> None:
    """The sample is every stride-th value across batch boundaries: with the ages 0..99,999 (age =
    position) in batches of uneven sizes, every percentile is within a stride of the exact one."""
    stats, position, sizes = LatencyStats(), 0, [1, 7, 1_000, 3, 4_096, 13, 20_000, 2, 999]
    while position < 100_000:
        size = min(sizes[position % len(sizes)], 100_000 - position)
        stats.add_ages(0.0, [-age for age in range(position, position + size)])
        position += size
    assert stats.count == 100_000 and stats.maximum == 99_999
    for q in (1, 25, 50, 75, 95, 99):
        assert abs((stats.percentile(q) or 0) - q * 1_000) <= 32  # the stride: 100,000 / 4,096 -> 32


def test_user_error_finds_our_error_inside_spark_output() -> None:
    text = (
        "[STREAM_FAILED] Query terminated with exception: ...\nTraceback (most recent call last):\n"
        '  File "x.py", line 1\nsrm.errors.DataLossError: flow a->b stopped (on_data_loss: fail): offsets 0..4\n'
        "\tat org.apache.spark..."
    )
    error = user_error(RuntimeError(text))
    assert isinstance(error, DataLossError)
    assert str(error) == "flow a->b stopped (on_data_loss: fail): offsets 0..4"
    other = user_error(RuntimeError("boom\nTraceback\nValueError: bad thing\n"))
    assert isinstance(other, ReplicationError) and str(other) == "ValueError: bad thing"


def test_freeze_heap_collects_garbage_then_keeps_what_survives_out_of_later_collections() -> None:
    """A copier's worker: full collections must not walk pyspark's and our long-lived objects at
    every lease, and garbage must not be frozen for good."""
    import gc
    import weakref

    from srm.replication.resident import freeze_heap

    class Node:
        pass

    cycle = Node()
    cycle.self = cycle  # type: ignore[attr-defined]
    garbage = weakref.ref(cycle)
    del cycle
    survivor: list[int] = []
    try:
        freeze_heap()
        assert garbage() is None, "a cycle left unreachable before the freeze was frozen instead of collected"
        assert gc.get_freeze_count() > 0
        assert not any(o is survivor for o in gc.get_objects()), "a live object is still walked by collections"
    finally:
        gc.unfreeze()
    assert any(o is survivor for o in gc.get_objects())
