"""What the soak records every minute."""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.latency import percentiles
from bench.usage import sample

SERIES = {
    # name: (label, unit)
    "job_rss_mb": ("replicate job: RSS of its process tree (the minute's median)", "MiB"),
    "job_pss_mb": ("replicate job: PSS of its process tree", "MiB"),
    "source_broker_rss_mb": ("source broker: RSS (the minute's median)", "MiB"),
    "target_broker_rss_mb": ("target broker: RSS (the minute's median)", "MiB"),
    "history_topic_mb": ("history topic: its log segments on disk", "MiB"),
    "history_table_mb": ("history table on disk (live files, replaced ones not vacuumed yet, log)", "MiB"),
    "history_rows": ("history table rows of the flow", "rows"),
    "history_span_min": ("how far back the history of the settled partitions reaches", "min"),
    "checkpoint_pass_s": ("last checkpoint pass (its own duration)", "s"),
    "checkpoint_pass_cpu_s": ("last checkpoint pass: CPU of its process (its own duration's work)", "s"),
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
    checkpoint_pass_cpu_s: float | None = None  # of the last pass (its log line); None before it was logged

    def row(self) -> dict[str, Any]:
        return asdict(self)


def tree_mb(pid: int | None) -> tuple[float, float, list[tuple[str, float]]]:
    """(RSS, PSS, [(process, PSS)]) in MiB of ``pid``'s process tree; zeros when it is not running."""
    if pid is None:
        return 0.0, 0.0, []
    found = sample(pid)
    return round(found.rss_mb, 1), round(found.pss_mb, 1), list(found.processes)


READINGS_PER_MINUTE = 6


def tree_rss_mb(pid: int | None) -> float:
    """RSS in MiB of ``pid``'s process tree (cheap: no smaps); 0 when it is not running."""
    if pid is None:
        return 0.0
    try:
        tree = [psutil.Process(pid)]
        tree += tree[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return 0.0
    total = 0
    for process in tree:
        try:
            total += process.memory_info().rss
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return total / 2**20


class Readings:
    """RSS readings of a few process trees taken through the minute (READINGS_PER_MINUTE of them):
    a minute's RSS is their median. One reading a minute lands on a Python worker's batch or a
    collection at random (+-50 MiB on the replicate job's tree), which hides a slow climb in noise
    over a lifetime of 20 minutes; the median of six does not, and a leak moves it as much as
    every reading."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def take(self, pids: dict[str, int | None]) -> None:
        for name, pid in pids.items():
            mb = tree_rss_mb(pid)
            if mb:  # not running (a restart): left out rather than read as 0
                self.values.setdefault(name, []).append(mb)

    def median(self, name: str, instant: float) -> float:
        """The minute's median of ``name`` (``instant`` when nothing was read), and starts the next."""
        values = self.values.pop(name, [])
        return round(statistics.median(values), 1) if values else instant


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
