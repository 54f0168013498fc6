"""The copiers' lease statuses (srm.replication.status) and how the monitor counts them with the
lease rows: which partitions a transaction reports, the record format, and counts that neither
miss a lease's records nor count them twice when the lease's row arrives."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from srm.config import load_config
from srm.config.model import Flow
from srm.replication.job import CopyRange, PartitionResult
from srm.replication.partition_state import PartitionState
from srm.replication.status import STATS, LeaseStatus, StatusWriter
from srm.service.copied import FlowCopies
from srm.service.statuses import StatusTail
from tests.helpers import offline_config

STARTED_MS = int(time.time() * 1000) - 20_000


def state(partition: int, records: int = 0, started_ms: int = STARTED_MS) -> PartitionState:
    r = CopyRange("orders", partition, 0, 1_000, "id", "west.orders")
    result = PartitionResult("orders", partition, "west.orders", 1_000, started_ms=started_ms)
    if records:
        result.copied(0, records - 1, records, records * 100)
        result.transactions = 1
        result.latency.add_ages(1_000.0, [990] * records)
    state = PartitionState(r, result, 0, None, "id")
    state.committed_now(0.0)  # the records are on the target
    return state


def test_a_status_goes_with_a_partition_that_copied_at_most_every_interval() -> None:
    writer = StatusWriter(every_s=4.0)
    busy, idle = state(0, records=10), state(1)
    [status] = writer.statuses([busy, idle], now=100.0)  # an idle partition writes nothing
    assert (status.partition, status.records, status.byte_count, status.transactions) == (0, 10, 1000, 1)
    assert status.stats["latency_avg_ms"] == 10.0 and status.started_ms == STARTED_MS
    busy.result.copied(10, 19, 10, 1000)
    assert writer.due([busy], now=200.0) == []  # produced, not committed yet: nothing to say
    busy.committed_now(101.0)
    assert writer.statuses([busy], now=102.0) == []  # changed, but its last status is 2 s old
    assert writer.due([busy], now=104.0) == [busy]
    [later] = writer.statuses([busy], now=104.0)
    assert later.records == 20
    assert writer.due([busy], now=200.0) == []  # nothing changed since
    busy.saved = (0, 0)  # as the hand-over of a lease resets it
    busy.result = PartitionResult("orders", 0, "west.orders", 1_000, started_ms=STARTED_MS + 30_000)
    assert writer.due([busy], now=300.0) == []  # a new lease that copied nothing yet: no status


def test_a_status_reads_back_as_written_and_other_records_are_skipped() -> None:
    status = LeaseStatus.of(state(3, records=5), at_ms=STARTED_MS + 4_000)
    assert LeaseStatus.parse(status.key(), status.value()) == status
    assert LeaseStatus.parse(status.key(), None) is None  # a tombstone
    assert LeaseStatus.parse(b"junk", b"{}") is None
    row = status.row()
    assert set(STATS) <= set(row) and row["bytes"] == 500
    assert row["finished_at"] == datetime.fromtimestamp((STARTED_MS + 4_000) / 1000, UTC)


class Tail(StatusTail):
    """Statuses as read from the topic, without a cluster."""

    def __init__(self, statuses: list[LeaseStatus]) -> None:
        self.digest, self.window_ms, self._next = "", 300_000, None
        self._leases = {}
        for s in statuses:
            self._leases.setdefault((s.topic, s.partition), {})[s.started_ms] = s

    def close(self) -> None:
        pass


def lease_row(records: int, started_ms: int, finished_ms: int) -> dict[str, Any]:
    return {
        "topic": "orders",
        "partition": 0,
        "target_topic": "west.orders",
        "records": records,
        "bytes": records * 100,
        "transactions": 1,
        "aborted": 0,
        "started_at": datetime.fromtimestamp(started_ms / 1000, UTC),
        "finished_at": datetime.fromtimestamp(finished_ms / 1000, UTC),
    }


def test_a_running_lease_is_counted_from_its_status_until_its_row_comes(tmp_path: Path) -> None:
    flow: Flow = load_config(offline_config(tmp_path)).enabled_flows()[0]
    copies = FlowCopies(flow)
    first = LeaseStatus.of(state(0, records=40), at_ms=STARTED_MS + 10_000)
    tail = copies._tail = Tail([first])
    [copied], shown = copies.count([], None, None)
    assert copied.records == 40 and shown == [first]  # no row yet: the status counts
    # The lease ended with 50 records (its row), the next one copied 7 so far.
    after = LeaseStatus.of(state(0, records=7, started_ms=STARTED_MS + 30_000), at_ms=STARTED_MS + 34_000)
    tail._leases[("orders", 0)][after.started_ms] = after
    row = lease_row(50, STARTED_MS, STARTED_MS + 30_000)
    [copied], shown = copies.count([row], None, None)
    assert copied.records == 57 and shown == [after]  # the row replaces the first lease's status
    [copied], _ = copies.count([row], None, None)
    assert copied.records == 57  # the same row again is not counted twice
