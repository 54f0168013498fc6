"""What a flow copied, as the monitor shows it: per partition the records, bytes and transactions since
the monitor started (MirrorMaker 2's counts are since its task started), the newest lease figures
(rates, record ages, replication latencies), checkpoint latencies and records lost.

A lease's metrics row reaches the warehouse when the lease ends; until then the copiers' statuses
(srm.replication.status, read by srm.service.statuses) stand for it, so that the figures are at most
a status interval plus a round old. A status is counted until its lease's row is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from srm.config.model import Cluster, Flow
from srm.kafka import clients
from srm.operations.health import Position
from srm.replication.status import LeaseStatus
from srm.service.snapshot import Copied, now_ms
from srm.service.statuses import StatusTail
from srm.storage.warehouse import CHECKPOINT_METRICS, DATA_LOSS, METRICS, Warehouse, in_window

# The newest lease metrics of a partition are looked for this far back, and at least a minute
# more than the flow's longest lease (task.lease.idle.seconds): an idle partition keeps its figures.
LEASE_WINDOW_S = 300.0
CHECKPOINT_WINDOW_S = 600.0  # and the newest checkpoint latencies
LEASE_COLUMNS = [
    "topic",
    "partition",
    "target_topic",
    "records",
    "bytes",
    "transactions",
    "aborted",
    *(f"{m}_{k}_ms" for m in ("record_age", "latency") for k in ("min", "avg", "max")),
    "started_at",
    "finished_at",
]


class FlowCopies:
    """One flow's counts, kept across the monitor's rounds (one round at a time)."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        # Per partition: the newest lease row counted (when it finished, when it started), the sums.
        self._counted: dict[tuple[str, int], tuple[int, int, Copied]] = {}
        self._counted_until = 0  # the newest lease row counted (ms)
        self._tail: StatusTail | None = None
        self.window_s = max(LEASE_WINDOW_S, flow.settings.longest_lease_seconds + 60.0)

    def observe(
        self, warehouse: Warehouse, positions: dict[tuple[str, int], Position] | None, target: Cluster | None
    ) -> tuple[list[Copied], list[dict[str, Any]]]:
        """The counts per partition and the newest lease figures of each (a row, or a status shaped as
        one). One scan of the lease rows serves both; the statuses are read unless ``target`` is None
        (it does not answer)."""
        end = now_ms() + 1
        start = min(self._counted_until or end, end) - int(self.window_s * 1000)
        scanned = warehouse.scan(METRICS, in_window(self.flow.name, "finished_at", start, end), LEASE_COLUMNS)
        rows = [] if scanned is None else scanned.to_pylist()
        copied, statuses = self.count(rows, positions, target)
        leases = newest_leases([*rows, *(s.row() for s in statuses)], end - int(self.window_s * 1000))
        return copied, leases

    def count(
        self,
        rows: list[dict[str, Any]],
        positions: dict[tuple[str, int], Position] | None,
        target: Cluster | None,
    ) -> tuple[list[Copied], list[LeaseStatus]]:
        """Records, bytes and transactions copied per partition since the monitor started (as MM2's
        counts since its task started): the sum of the lease rows it has seen, and of the statuses
        of the leases whose rows have not come yet (read now unless ``target`` is None: it does not
        answer). ``rows``: the lease rows from the lease window before the newest counted (a lease's
        rows are appended when the lease ends); partitions the flow no longer has are dropped.
        Also the statuses counted."""
        counted = self._counted
        for row in rows:
            key = (row["topic"], row["partition"])
            finished = int(row["finished_at"].timestamp() * 1000)
            started = int(row["started_at"].timestamp() * 1000)
            fresh = Copied(row["topic"], row["partition"], row["target_topic"])
            seen, newest, before = counted.get(key, (0, -1, fresh))
            if finished <= seen:
                continue
            counted[key] = (
                finished,
                max(newest, started),
                replace(
                    before,
                    remote_topic=row["target_topic"] or before.remote_topic,
                    records=before.records + row["records"],
                    bytes=before.bytes + row["bytes"],
                    transactions=before.transactions + row["transactions"],
                    aborted=before.aborted + (row["aborted"] or 0),  # null in rows written before the column
                ),
            )
            self._counted_until = max(self._counted_until, finished)
        tail = self._status_tail(target)
        if positions is not None:
            for gone in set(counted) - set(positions):
                del counted[gone]
            if tail is not None:
                tail.forget(set(positions))
        if tail is not None and target is not None:
            tail.read()
        statuses = [] if tail is None else tail.current({key: started for key, (_, started, _) in counted.items()})
        totals = {key: copied for key, (_, _, copied) in counted.items()}
        for status in statuses:
            key = (status.topic, status.partition)
            before = totals.get(key, Copied(status.topic, status.partition, status.target_topic))
            totals[key] = replace(
                before,
                records=before.records + status.records,
                bytes=before.bytes + status.byte_count,
                transactions=before.transactions + status.transactions,
                aborted=before.aborted + status.aborted,
            )
        return [totals[key] for key in sorted(totals)], statuses

    def _status_tail(self, target: Cluster | None) -> StatusTail | None:
        """The reader of the flow's statuses, built again when the target's settings changed."""
        tail = self._tail
        if target is None:
            return tail
        if tail is not None and tail.digest != clients.settings_digest(target):
            tail.close()
            tail = None
        if tail is None:
            tail = self._tail = StatusTail(target, self.flow, self.window_s)
        return tail

    def close(self) -> None:
        if self._tail is not None:
            self._tail.close()
            self._tail = None


def newest_leases(rows: list[dict[str, Any]], since_ms: int) -> list[dict[str, Any]]:
    """The newest lease row of each partition among ``rows`` finished at or after ``since_ms``."""
    newest: dict[tuple[str, int], dict[str, Any]] = {}
    for row in rows:
        if row["finished_at"].timestamp() * 1000 < since_ms:
            continue
        key = (row["topic"], row["partition"])
        if key not in newest or row["finished_at"] > newest[key]["finished_at"]:
            newest[key] = row
    return [newest[k] for k in sorted(newest)]


def checkpoint_latencies(warehouse: Warehouse, flow: Flow) -> list[dict[str, Any]]:
    end = now_ms() + 1
    scanned = warehouse.scan(
        CHECKPOINT_METRICS,
        in_window(flow.name, "written_at", end - int(CHECKPOINT_WINDOW_S * 1000), end),
        ["direction", "group", "topic", "partition", "latency_ms", "written_at"],
    )
    found: dict[tuple[str, str, int], list[tuple[Any, float]]] = {}
    for row in [] if scanned is None else scanned.to_pylist():
        if row["direction"] != "forward" or row["latency_ms"] is None:
            continue
        found.setdefault((row["group"], row["topic"], row["partition"]), []).append(
            (row["written_at"], row["latency_ms"])
        )
    out = []
    for (group, topic, partition), values in sorted(found.items()):
        latencies = [v for _, v in values]
        out.append(
            {
                "group": group,
                "topic": topic,
                "partition": partition,
                "latency_ms": max(values)[1],
                "min": min(latencies),
                "max": max(latencies),
                "avg": sum(latencies) / len(latencies),
            }
        )
    return out


def losses(warehouse: Warehouse, flow: Flow) -> list[tuple[str, int, int]]:
    import pyarrow.compute as pc

    scanned = warehouse.scan(DATA_LOSS, pc.field("flow") == flow.name, ["topic", "partition", "records"])
    sums: dict[tuple[str, int], int] = {}
    for row in [] if scanned is None else scanned.to_pylist():
        key = (row["topic"], row["partition"])
        sums[key] = sums.get(key, 0) + row["records"]
    return [(t, p, n) for (t, p), n in sorted(sums.items())]
