"""What each partition's current lease copied so far, written by the copiers for the monitoring service.

A lease's metrics row reaches the warehouse when the lease ends (``task.lease.seconds``), too late
for figures that must be at most 15 s old. So the copier also writes, inside its transactions, a
:class:`LeaseStatus` per partition that copied: the lease's counts and record-age and latency
statistics so far, at most every STATUS_EVERY_S per partition, and once more STATUS_EVERY_S after
the partition went quiet (a transaction of its own, so that a burst's last figures do not wait for
the next records). Idle partitions write nothing. The topic, ``srm-status.<source>.internal`` on
the target, is compacted: one record per partition survives. The monitor (srm.service.statuses)
reads it from where it left off; a status is superseded by its lease's row (same partition, same
``started_ms``).

Key: JSON ``[topic, partition]``; value: JSON object (a monitoring payload, not a wire format of MM2).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from srm.replication.partition_state import PartitionState

STATUS_EVERY_S = 4.0
STATS = tuple(f"{m}_{k}_ms" for m in ("record_age", "latency") for k in ("min", "avg", "max"))


@dataclass(frozen=True)
class LeaseStatus:
    topic: str
    partition: int
    target_topic: str
    started_ms: int  # the lease's start: its metrics row has the same started_at
    at_ms: int  # when the figures were taken
    records: int
    byte_count: int  # of the records' values
    transactions: int
    aborted: int
    stats: dict[str, float | None]  # STATS, None when the lease copied nothing yet

    @classmethod
    def of(cls, state: PartitionState, at_ms: int) -> LeaseStatus:
        """The lease's figures as of the partition's last commit (records visible on the target, with
        the latencies measured at their commits), not the records of the transaction under way."""
        result = state.result
        stats: dict[str, float | None] = {}
        for name, figures in (("record_age", result.record_age), ("latency", result.latency)):
            stats.update({f"{name}_min_ms": figures.minimum, f"{name}_avg_ms": figures.average})
            stats[f"{name}_max_ms"] = figures.maximum  # not the percentile: it sorts the sample
        records, size = state.saved
        return LeaseStatus(
            result.topic,
            result.partition,
            result.target_topic,
            result.started_ms,
            at_ms,
            records,
            size,
            result.transactions,
            result.aborted,
            stats,
        )

    def key(self) -> bytes:
        return json.dumps([self.topic, self.partition]).encode()

    def value(self) -> bytes:
        fields = asdict(self)
        del fields["topic"], fields["partition"]
        return json.dumps(fields, separators=(",", ":")).encode()

    @classmethod
    def parse(cls, key: bytes | None, value: bytes | None) -> LeaseStatus | None:
        """The status of a record, None for one that is not a status (a tombstone, another format)."""
        try:
            topic, partition = json.loads(key or b"")
            fields = json.loads(value or b"")
            stats = fields["stats"]
            return LeaseStatus(
                topic=str(topic),
                partition=int(partition),
                target_topic=str(fields["target_topic"]),
                started_ms=int(fields["started_ms"]),
                at_ms=int(fields["at_ms"]),
                records=int(fields["records"]),
                byte_count=int(fields["byte_count"]),
                transactions=int(fields["transactions"]),
                aborted=int(fields["aborted"]),
                stats={k: None if stats.get(k) is None else float(stats[k]) for k in STATS},
            )
        except (ValueError, TypeError, KeyError):
            return None

    def row(self) -> dict[str, Any]:
        """Shaped as a lease row of the metrics table (the columns the monitor reads)."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "target_topic": self.target_topic,
            "records": self.records,
            "bytes": self.byte_count,
            "transactions": self.transactions,
            "aborted": self.aborted,
            **self.stats,
            "started_at": datetime.fromtimestamp(self.started_ms / 1000, UTC),
            "finished_at": datetime.fromtimestamp(self.at_ms / 1000, UTC),
        }


class StatusWriter:
    """Decides which partitions' statuses a transaction carries."""

    def __init__(self, every_s: float = STATUS_EVERY_S) -> None:
        self.every_s = every_s
        self._sent: dict[PartitionState, tuple[int, int, int, int, int]] = {}
        self._at: dict[PartitionState, float] = {}

    @staticmethod
    def _figures(state: PartitionState) -> tuple[int, int, int, int, int]:
        r = state.result
        return (r.started_ms, state.saved[0], r.transactions, r.aborted, state.saved[1])

    def _changed(self, state: PartitionState) -> bool:
        figures = self._figures(state)
        return figures[1:4] != (0, 0, 0) and self._sent.get(state) != figures

    def due(self, states: Iterable[PartitionState], now: float) -> list[PartitionState]:
        """Partitions whose figures changed since their last status, STATUS_EVERY_S after it."""
        since = now - self.every_s
        return [s for s in states if self._changed(s) and self._at.get(s, float("-inf")) <= since]

    def statuses(self, states: Iterable[PartitionState], now: float) -> list[LeaseStatus]:
        """The statuses of ``due(states)``, taken now: the caller produces them in its transaction."""
        at_ms = int(time.time() * 1000)
        out = []
        for state in self.due(states, now):
            out.append(LeaseStatus.of(state, at_ms))
            self._sent[state] = self._figures(state)
            self._at[state] = now
        return out

    def track(self, states: Iterable[PartitionState]) -> None:
        """Forget the partitions no longer copied."""
        kept = set(states)
        for gone in set(self._sent) - kept:
            del self._sent[gone]
        for gone in set(self._at) - kept:
            del self._at[gone]
