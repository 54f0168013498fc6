"""Pure parts of flow ownership and of continuous mode's plans: records, ids, lease ranges, rewinds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from srm.config import parse_config
from srm.config.model import Flow
from srm.errors import RecordFormatError
from srm.replication import offsets as plan
from srm.replication.job import OPEN_END, CopyRange, PartitionResult, copy_transactional_ids
from srm.replication.ownership import (
    STOPPED,
    Ownership,
    epochs_transactional_ids,
    live_epochs,
    owner_transactional_id,
    taken_over,
)
from srm.replication.partition_state import PartitionState
from srm.spark.session import local_master

CONFIG = """\
clusters:
  a: {bootstrap.servers: "127.0.0.1:1"}
  b: {bootstrap.servers: "127.0.0.1:2"}
flows:
  - {source: a, target: b}
"""


def flow() -> Flow:
    config, issues = parse_config(CONFIG, "srm.yaml")
    assert config is not None, issues
    return config.flow("a", "b")


def test_ownership_record_round_trips_and_names_its_run() -> None:
    record = Ownership(
        "a->b",
        7,
        "r1",
        "srm-control run on host h (pid 9)",
        3,
        "continuous",
        "2026-11-23T10:00:00+00:00",
        lease=4,
        unfenced=((5, 2), (6, 1)),
    )
    assert Ownership.from_json(record.to_json(), "x") == record
    assert record.describe() == (
        "run r1 (srm-control run on host h (pid 9); epoch 7, tasks.max 3, since 2026-11-23T10:00:00+00:00)"
    )


def test_a_broken_ownership_record_names_where_it_is() -> None:
    with pytest.raises(RecordFormatError, match=r"srm-owners.internal\[0\]@12: not an ownership record"):
        Ownership.from_json(b'{"epoch": 1}', "srm-owners.internal[0]@12")


def test_transactional_ids_carry_the_epoch_and_the_slot() -> None:
    f = flow()
    assert copy_transactional_ids(f, 1, 0) == ("srm-replicate.a.b.1.0", "srm-replicate.a.b.1.0.alt")
    assert copy_transactional_ids(f, 4, 1) == ("srm-replicate.a.b.4.1", "srm-replicate.a.b.4.1.alt")
    assert owner_transactional_id(f) == "srm-replicate.a.b.owner"


def test_the_producers_spared_when_a_transaction_left_open_is_ended_are_those_that_may_be_alive() -> None:
    """A transaction Kafka left open is ended by its transactional id only when no live copier holds
    that id (srm.replication.ownership.end_hanging_transactions)."""
    running = Ownership("a->b", 7, "r1", "me", 2, "continuous", "2026-12-04T12:00:00+00:00", unfenced=((5, 1),))
    assert live_epochs(running) == [(5, 1), (7, 2)]  # epoch 5 not fenced yet, epoch 7 running
    assert live_epochs(replace(running, state=STOPPED, unfenced=())) == []  # stopped: its copiers are gone
    assert live_epochs(None) == []  # the flow never ran
    assert epochs_transactional_ids(flow(), live_epochs(running)) == [
        "srm-replicate.a.b.5.0",
        "srm-replicate.a.b.5.0.alt",
        "srm-replicate.a.b.7.0",
        "srm-replicate.a.b.7.0.alt",
        "srm-replicate.a.b.7.1",
        "srm-replicate.a.b.7.1.alt",
    ]


def test_taken_over_message_names_the_new_owner_and_what_happened() -> None:
    other = Ownership(
        "a->b",
        9,
        "r2",
        "Airflow task a_to_b.replicate, run x, try 2 on host h (pid 1)",
        2,
        "continuous",
        "2026-11-23T10:00:00+00:00",
    )
    message = str(taken_over(flow(), 8, other))
    assert message.startswith("flow a->b was taken over by run r2 (Airflow task a_to_b.replicate")
    assert "this run (epoch 8) stopped" in message and "nothing is lost or copied twice" in message


def test_a_lease_names_every_partition_from_where_the_last_plan_left_it() -> None:
    start = plan.build({("a", 0): 10, ("a", 1): 5}, {"a": "id-a"})
    end = plan.build({("a", 0): 12, ("a", 1): 5, ("a", 2): 3}, {"a": "id-a"}, initial={("a", 2): 0})
    got = {r.key: (r.start, r.end, r.initial) for r in plan.lease_ranges(start, end, {"a": "X.a"})}
    assert got == {("a", 0): (10, 12, False), ("a", 1): (5, 5, False), ("a", 2): (0, 3, True)}


def state(committed: int | None, origin: int) -> PartitionState:
    r = CopyRange("t", 0, origin, OPEN_END, "id", "X.t")
    s = PartitionState(r, PartitionResult("t", 0, "X.t", OPEN_END), origin, committed, "id", origin=origin)
    return s


def test_a_rewind_goes_back_to_the_committed_progress_and_its_counts() -> None:
    s = state(committed=None, origin=40)
    assert s.open_ended and s.dirty
    s.next_offset, s.result.records, s.result.bytes = 45, 5, 500
    s.committed_now(1.0)
    assert (s.committed, s.saved, s.dirty) == (45, (5, 500), False)
    s.next_offset, s.result.records, s.result.bytes = 52, 12, 1200
    s.produced.extend(range(45, 52))
    s.stamps.extend([1] * 7)
    assert s.rewind() == 45
    assert (s.next_offset, s.result.records, s.result.bytes, len(s.produced), len(s.stamps)) == (45, 5, 500, 0, 0)
    fresh = state(committed=None, origin=40)
    fresh.next_offset = 44
    assert fresh.rewind() == 40  # nothing committed yet: back to where copying began


def test_a_local_master_has_task_threads_for_every_slot_and_as_many_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    assert local_master(1) == "local[*, 4]"  # all cores are already twice one slot
    assert local_master(2) == "local[4, 4]"  # tasks.max raised to 4 in the YAML: no restart
    assert local_master(5) == "local[10, 4]"


def test_progress_record_round_trips_with_its_layout() -> None:
    from srm.mm2.records import ProgressRecord

    record = ProgressRecord("orders", 3, "AbC", 120)
    assert record.key().hex() == "00066f7264657273" + "00000003"
    assert record.value().hex() == "0000" + "0003416243" + "0000000000000078"
    assert ProgressRecord.decode(record.key(), record.value()) == record


def test_journaled_progress_record_carries_the_history_offset_after_the_plain_layout() -> None:
    from srm.mm2.records import ProgressRecord

    plain = ProgressRecord("orders", 3, "AbC", 120)
    journaled = ProgressRecord("orders", 3, "AbC", 120, history_from=7)
    assert journaled.value() == plain.value() + bytes.fromhex("0000000000000007")
    assert ProgressRecord.decode(journaled.key(), journaled.value()) == journaled
    assert journaled.journaled and not plain.journaled
    assert ProgressRecord.decode(plain.key(), plain.value()).history_from == -1  # written by earlier versions


def test_progress_record_with_a_negative_history_offset_is_refused() -> None:
    from srm.errors import RecordFormatError
    from srm.mm2.records import ProgressRecord

    plain = ProgressRecord("orders", 3, "AbC", 120)
    with pytest.raises(RecordFormatError, match="negative history offset -5"):
        ProgressRecord.decode(plain.key(), plain.value() + (-5).to_bytes(8, "big", signed=True))
