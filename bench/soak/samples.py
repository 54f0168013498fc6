"""What the soak records every minute."""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.latency import percentiles
from bench.usage import sample

SERIES = {
    # name: (label, unit)
    "job_rss_mb": ("replicate job: RSS of its process tree", "MiB"),
    "job_pss_mb": ("replicate job: PSS of its process tree", "MiB"),
    "source_broker_rss_mb": ("source broker: RSS", "MiB"),
    "target_broker_rss_mb": ("target broker: RSS", "MiB"),
    "history_topic_mb": ("history topic: its log segments on disk", "MiB"),
    "history_table_mb": ("history table on disk (live files, replaced ones not vacuumed yet, log)", "MiB"),
    "history_rows": ("history table rows of the flow", "rows"),
    "history_span_min": ("how far back the history of the settled partitions reaches", "min"),
    "checkpoint_pass_s": ("last checkpoint pass (its own duration)", "s"),
    "checkpoint_peak_pss_mb": ("last checkpoint pass: peak PSS of its tree", "MiB"),
    "checkpoint_positions": ("last checkpoint pass: group positions translated", "positions"),
    "translate_s": ("translating one group live (every partition)", "s"),
    "p50_ms": ("latency p50 over the minute", "ms"),
    "p99_ms": ("latency p99 over the minute", "ms"),
}


@dataclass
class Sample:
    minute: float  # minutes into the run
    job_rss_mb: float
    job_pss_mb: float
    source_broker_rss_mb: float
    target_broker_rss_mb: float
    history_topic_mb: float
    history_table_mb: float
    history_rows: int
    checkpoint_pass_s: float | None
    checkpoint_peak_pss_mb: float | None
    checkpoint_positions: int | None
    translate_s: float | None
    p50_ms: float | None
    p99_ms: float | None
    records: int  # arrivals over the minute
    job_processes: list[tuple[str, float]]  # (what, PSS MiB) of each process of the job's tree
    source_partitions: int | None = None  # of the load's topics (faults add some)
    settled_partitions: int | None = None  # of them, those older than the retention and a prune
    settled_rows: int | None = None  # the history rows of those
    history_span_min: float | None = None  # how far back their history reaches (oldest commit to newest)

    def row(self) -> dict[str, Any]:
        return asdict(self)


def tree_mb(pid: int | None) -> tuple[float, float, list[tuple[str, float]]]:
    """(RSS, PSS, [(process, PSS)]) in MiB of ``pid``'s process tree; zeros when it is not running."""
    if pid is None:
        return 0.0, 0.0, []
    found = sample(pid)
    return round(found.rss_mb, 1), round(found.pss_mb, 1), list(found.processes)


def folder_mb(path: Path, pattern: str = "*") -> float:
    """The bytes of the files under ``path`` matching ``pattern`` (0 when it does not exist), in MiB."""
    if not path.exists():
        return 0.0
    return round(sum(f.stat().st_size for f in path.rglob(pattern) if f.is_file()) / 2**20, 2)


def latency(values: list[float]) -> tuple[float | None, float | None]:
    if not values:
        return None, None
    figures = percentiles(values)
    return figures["p50_ms"], figures["p99_ms"]


def timed(call: Any) -> float | None:
    """Seconds ``call()`` took; None when it failed."""
    started = time.monotonic()
    try:
        call()
    except Exception:
        return None
    return round(time.monotonic() - started, 2)
