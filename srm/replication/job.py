"""What a copy task receives (ranges) and returns (per-partition results): plain, picklable data."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from srm.config.model import Cluster, Flow
from srm.replication.kafka_errors import transactional_prefix
from srm.replication.stats import LatencyStats

OPEN_END = 2**63 - 1  # the end of a continuous range: copy whatever arrives


@dataclass(frozen=True)
class CopyRange:
    """Copy source ``topic[partition]`` up to ``end`` (exclusive) into ``target_topic[partition]``.

    ``start`` is only a plan: the target's committed progress decides where copying resumes.
    ``initial`` asks for progress to be committed even if nothing is copied (first sight of a
    partition), so a later restart cannot re-derive a different starting point.
    """

    topic: str
    partition: int
    start: int
    end: int
    topic_id: str
    target_topic: str
    initial: bool = False

    @property
    def key(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class Lease:
    """Continuous mode: how long a task holds its slot, and how its copier commits.

    A later ownership record of the same epoch with a higher lease number ends this lease early;
    one of another epoch means the flow was taken over.
    """

    number: int
    seconds: float
    transaction_interval_ms: int
    transaction_linger_ms: int = 0


def copy_transactional_ids(flow: Flow, epoch: int, slot: int) -> tuple[str, ...]:
    """Stable per (flow, epoch, slot): a retried task of the same slot fences its predecessor. A
    slot has two (continuous mode alternates them, see :class:`srm.replication.writer.TargetWriter`)."""
    prefix = transactional_prefix(flow.source, flow.target)
    return f"{prefix}{epoch}.{slot}", f"{prefix}{epoch}.{slot}.alt"


@dataclass(frozen=True)
class CopyJob:
    """One slot's share of a micro-batch (available-now) or of a lease (continuous): its ranges,
    its epoch of the flow's ownership, and what it needs to reach both clusters."""

    flow: Flow
    source: Cluster
    target: Cluster
    slot: int
    ranges: tuple[CopyRange, ...]
    history_topic: str
    progress_topic: str
    epoch: int
    owners_run: str  # the run that owns ``epoch`` (a newer epoch of the same run is no takeover)
    owners_offset: int  # where the task starts reading the flow's ownership records
    mm2_syncs_on_target: str | None = None  # MM2 offset-syncs topic when it lives on the target
    lease: Lease | None = None  # None: available-now, copy the ranges to their ends and return
    slots: int = 1  # the epoch's slots (its tasks.max)

    @property
    def linger_ms(self) -> int:
        """The lease's transaction.linger.ms (0 without one, and in available-now mode): how long
        the copier's transactions stay open at least, which its clients batch for
        (srm.replication.producers.producer_settings, srm.replication.source_reader.consumer_settings)."""
        return self.lease.transaction_linger_ms if self.lease is not None else 0

    def lingering_digest(self, digest: str) -> str:
        """``digest`` (a cluster's client settings, srm.kafka.clients.settings_digest) for clients
        whose settings follow the linger too: the client cache builds them again when it changes."""
        return f"{digest}:linger={self.linger_ms}"

    @property
    def transactional_id(self) -> str:
        return self.transactional_ids[0]

    @property
    def transactional_ids(self) -> tuple[str, ...]:
        """The slot's transactional ids: the first, and the one continuous mode alternates with."""
        return copy_transactional_ids(self.flow, self.epoch, self.slot)

    @property
    def others_transactional_ids(self) -> list[str]:
        """The transactional ids of the epoch's other slots."""
        others = (slot for slot in range(self.slots) if slot != self.slot)
        return [tid for slot in others for tid in copy_transactional_ids(self.flow, self.epoch, slot)]


@dataclass(frozen=True)
class Loss:
    """Source offsets [first, end) of a partition that were gone before they could be copied."""

    topic: str
    partition: int
    first: int
    end: int
    reason: str

    def __str__(self) -> str:
        count = self.end - self.first
        where = f"topic {self.topic!r} partition {self.partition}"
        if count <= 0:
            return f"{where}: offsets from {self.first} on {self.reason}"
        return f"{where}: offsets {self.first}..{self.end - 1} ({count} record(s)) {self.reason}"


@dataclass
class PartitionResult:
    """What happened to one partition in one task."""

    topic: str
    partition: int
    target_topic: str
    planned_end: int
    next_offset: int = -1  # progress after the task (the next source offset to copy)
    records: int = 0
    bytes: int = 0
    first_offset: int = -1
    last_offset: int = -1
    target_first: int = -1
    target_last: int = -1
    transactions: int = 0
    aborted: int = 0  # transactions holding records of the partition that were aborted (copied again)
    runs: list[tuple[int, int, int]] = field(default_factory=list)
    losses: list[Loss] = field(default_factory=list)
    record_age: LatencyStats = field(default_factory=LatencyStats)
    latency: LatencyStats = field(default_factory=LatencyStats)
    started_ms: int = 0
    finished_ms: int = 0

    def copied(self, first_offset: int, last_offset: int, records: int, size: int) -> None:
        """``records`` more records copied, ``size`` bytes of values, up to source offset ``last_offset``."""
        if self.first_offset < 0:
            self.first_offset = first_offset
        self.last_offset = last_offset
        self.records += records
        self.bytes += size

    def row(self) -> dict[str, Any]:
        """The metrics-table shape (statistics flattened)."""
        skip = ("runs", "losses", "record_age", "latency")
        base = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}
        return {**base, **self.record_age.summary("record_age"), **self.latency.summary("latency")}

    def payload(self) -> dict[str, Any]:
        """What a Spark task sends back to the driver: the row, the runs and the losses."""
        return {"row": self.row(), "runs": list(self.runs), "losses": [vars(loss) for loss in self.losses]}


# A task whose failure outlasted the flow's errors.retry.timeout returns it instead of raising:
# Spark would start the task again (spark.task.maxFailures) and the outage would last that many
# bounds; the driver fails the flow with the message (LastingFaultError).
FAULT = "fault"


def fault_payload(message: str) -> dict[str, Any]:
    return {FAULT: message}


def split_faults(payloads: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str | None]:
    """(the partitions' payloads, the first fault's message or None)."""
    faults = [p[FAULT] for p in payloads if FAULT in p]
    return [p for p in payloads if FAULT not in p], (faults[0] if faults else None)
