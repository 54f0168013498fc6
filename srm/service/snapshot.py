"""What the monitoring service knows of every flow at one moment (a :class:`Snapshot`), and how its
texts are shown: no bootstrap servers, no configuration path."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srm.config.model import Flow, SrmConfig
from srm.errors import ConfigIssue
from srm.operations.health import FlowHealth


@dataclass(frozen=True)
class ClusterState:
    alias: str
    reachable: bool
    since_ms: int  # when it entered this state
    checked_ms: int
    detail: str = ""  # why it is unreachable; never its bootstrap servers or settings

    def unreachable_reason(self) -> str | None:
        if self.reachable:
            return None
        return f"{self.alias} unreachable since {iso(self.since_ms)}: {self.detail}"


@dataclass(frozen=True)
class PartitionFigures:
    topic: str
    partition: int
    end: int
    next_offset: int
    lag: int
    oldest_ms: int | None  # the timestamp of the oldest record not copied yet (None: none, or not read)


@dataclass(frozen=True)
class Copied:
    """What the flow copied of one partition since the monitor started: the sums of its lease rows,
    and of the statuses of the leases whose rows have not come yet."""

    topic: str
    partition: int
    remote_topic: str
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    aborted: int = 0  # transactions holding its records that were aborted (and copied again)


@dataclass(frozen=True)
class FlowView:
    flow: Flow
    health: FlowHealth
    partitions: tuple[PartitionFigures, ...] = ()
    leases: tuple[dict[str, Any], ...] = ()  # the newest replication_metrics row of each partition
    checkpoints: tuple[dict[str, Any], ...] = ()  # per group partition: newest, min, max, avg latency
    lost: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, records) lost, all time
    copied: tuple[Copied, ...] = ()
    observed_ms: int = 0
    note: str = ""  # why these figures are older than the snapshot

    def as_dict(self, now_ms: int) -> dict[str, Any]:
        out = self.health.as_dict()
        out["observed_at"] = iso(self.observed_ms) if self.observed_ms else None
        out["age_s"] = round((now_ms - self.observed_ms) / 1000, 1) if self.observed_ms else None
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class BrokenFlow:
    """A flow of the file that does not parse: its problems, by line (never the file's path)."""

    name: str
    problems: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"flow": self.name, "state": "invalid", "reason": "; ".join(self.problems)}


@dataclass(frozen=True)
class Snapshot:
    taken_ms: int
    config: SrmConfig | None = None
    flows: dict[str, FlowView] = field(default_factory=dict)
    clusters: dict[str, ClusterState] = field(default_factory=dict)
    broken: tuple[BrokenFlow, ...] = ()
    problem: str | None = None  # the file as a whole cannot be used
    exposition: bytes = b""


def issue_text(issue: ConfigIssue) -> str:
    """An issue as a reader of the API sees it: the file's name and line, not its path."""
    where = f"{Path(issue.file).name}:{issue.line}" if issue.line else Path(issue.file).name
    return f"{where}: {issue.key}: {issue.message}" if issue.key else f"{where}: {issue.message}"


def redact(text: str, clusters: Any, file: str | None = None) -> str:
    """``text`` as the API may show it: without the clusters' bootstrap servers and the
    configuration file's path (its name stays)."""
    for cluster in clusters:
        servers = [s.strip() for s in (cluster.bootstrap_servers or "").split(",") if s.strip()]
        if cluster.bootstrap_servers:
            text = text.replace(f" ({cluster.bootstrap_servers})", "")
        for server in servers:
            text = text.replace(server, "<broker>")
    if file:
        text = text.replace(str(Path(file).resolve()), Path(file).name).replace(file, Path(file).name)
    return text


def now_ms() -> int:
    return int(time.time() * 1000)


def iso(ms: int) -> str:
    """``ms`` since the epoch as ISO 8601 UTC to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
