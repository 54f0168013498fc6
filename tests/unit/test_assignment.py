"""Placing partitions on copy slots by their load: hot partitions apart, quiet ones spread evenly,
a partition kept on its slot within an epoch, placed again when the loads drift apart."""

from __future__ import annotations

import logging

import pytest

from srm.replication import assignment
from srm.replication.assignment import Assignment, balanced, slot_loads

MB = 1024 * 1024
EVERY_S = 600.0  # tasks.rebalance.interval.seconds' default


def row(topic: str, partition: int, size: int, records: int = 0) -> dict[str, object]:
    return {"topic": topic, "partition": partition, "bytes": size, "records": records}


def test_hot_partitions_go_to_different_slots_and_quiet_ones_are_spread_evenly() -> None:
    loads = {("t", p): 0.0 for p in range(10)} | {("hot", 0): 5.0 * MB, ("hot", 1): 4.0 * MB}
    placed = balanced(loads, 2)
    assert placed[("hot", 0)] != placed[("hot", 1)]
    assert sorted(slot_loads(placed, loads, 2)) == [4.0 * MB, 5.0 * MB]
    counts = [list(placed.values()).count(s) for s in (0, 1)]
    assert counts == [6, 6]  # the quiet ones fill the slots up to the same count
    assert balanced(loads, 2) == placed  # the same answer every time: no salted hash
    assert set(balanced(loads, 1).values()) == {0}


def test_without_any_load_the_partitions_are_dealt_evenly() -> None:
    placed = balanced({("orders", p): 0.0 for p in range(64)}, 4)
    assert [list(placed.values()).count(s) for s in range(4)] == [16, 16, 16, 16]


def test_within_an_epoch_a_partition_keeps_its_slot_and_new_ones_go_where_the_fewest_are() -> None:
    a = Assignment()
    keys = [("t", p) for p in range(4)]
    first = a.place(keys, epoch=1, slots=2, now=0.0)
    a.observe([row("t", p, 10 * MB if first[("t", p)] == 0 else 0) for p in range(4)], seconds=10.0)
    new = [("new", p) for p in range(6)]  # a new topic: its load is not known yet
    second = a.place([*keys, *new], epoch=1, slots=2, now=1.0)
    assert {k: second[k] for k in keys} == first  # kept, whatever the loads say
    assert [second[k] for k in new].count(0) == 3  # dealt out, not all on the idle slot
    assert a.place(keys[:2], epoch=1, slots=2, now=2.0) == {k: first[k] for k in keys[:2]}  # removed ones dropped
    assert set(a.placement) == set(keys[:2]) and set(a.loads) <= set(keys[:2])  # forgotten: bounded state


def test_a_new_placement_is_described_per_slot_for_the_log() -> None:
    a = Assignment()
    a.place([("t", p) for p in range(6)], epoch=1, slots=2, now=0.0)
    a.observe([row("t", 0, 2 * MB)], seconds=1.0)
    text = a.describe(shown=2)
    assert text.startswith("slot 0: 3 partition(s), 2,048 KiB/s (t[0], t[2], ...); slot 1: 3 partition(s), 0 KiB/s")


def test_a_new_epoch_places_everything_again_by_the_observed_loads() -> None:
    a = Assignment()
    keys = [("t", p) for p in range(4)]
    first = a.place(keys, epoch=1, slots=2, now=0.0)
    busy = [k for k in keys if first[k] == 0]
    a.observe([row(t, p, 10 * MB) for t, p in busy], seconds=1.0)
    again = a.place(keys, epoch=2, slots=2, now=1.0)
    assert again[busy[0]] != again[busy[1]]


def test_drift_asks_for_a_new_placement_only_when_it_gains_enough_and_the_epoch_is_old_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    a = Assignment()
    keys = [("t", p) for p in range(4)]
    first = a.place(keys, epoch=1, slots=2, now=0.0)
    busy = [k for k in keys if first[k] == 0]
    for _ in range(10):  # the two partitions of slot 0 carry 1 MiB/s each, the others nothing
        a.observe([row(t, p, MB) for t, p in busy], seconds=1.0)
    assert a.drift(now=EVERY_S - 1, every_s=EVERY_S) is None  # too soon after the epoch began
    assert a.drift(now=10 * EVERY_S, every_s=0) is None  # never, as the flow says
    reason = a.drift(now=EVERY_S, every_s=EVERY_S)
    assert reason is not None and "2,0" in reason and "1,0" in reason  # 2,048 KiB/s where 1,024 is possible
    monkeypatch.setattr(assignment, "REBALANCE_MIN_BYTES_S", 2 * MB)
    assert a.drift(now=EVERY_S, every_s=EVERY_S) is None  # a gain too small for the pause of a new epoch


def test_a_rows_own_time_counts_where_it_has_one() -> None:
    a = Assignment()
    a.place([("t", 0)], epoch=1, slots=2, now=0.0)
    timed = row("t", 0, MB) | {"started_ms": 1_000, "finished_ms": 3_000}  # 2 s of its own
    a.observe([timed], seconds=1.6)  # the driver's wall time of the lease
    assert a.loads[("t", 0)] == MB / 2


def test_loads_count_records_too_and_fade_when_a_partition_goes_quiet() -> None:
    a = Assignment()
    a.place([("t", 0)], epoch=1, slots=2, now=0.0)
    a.observe([row("t", 0, 0, records=1000)], seconds=1.0)
    assert a.loads[("t", 0)] == 1000 * assignment.RECORD_COST_BYTES
    a.observe([], seconds=1.0)  # idle partitions are left out of a lease's rows
    assert a.loads[("t", 0)] == pytest.approx(0.7 * 1000 * assignment.RECORD_COST_BYTES)


def test_partitions_found_within_an_epoch_are_dealt_by_count_and_the_log_shows_where(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assignment = Assignment("w->e")
    assert assignment.place([], epoch=1, slots=2, now=0.0) == {}
    with caplog.at_level(logging.INFO, logger="srm.replication.assignment"):
        placed = assignment.place([("t", p) for p in range(4)], epoch=1, slots=2, now=1.0)
    assert placed == {("t", 0): 0, ("t", 1): 1, ("t", 2): 0, ("t", 3): 1}
    assert "epoch 1 places 4 partition(s) found within it by count: slot 0: 2 partition(s), 0 KiB/s (t[0], t[2])" in (
        caplog.text
    )
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="srm.replication.assignment"):
        assignment.place([("t", p) for p in range(4)], epoch=1, slots=2, now=2.0)
    assert "found within it" not in caplog.text  # nothing new: nothing said
