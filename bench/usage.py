"""CPU seconds and peak memory of a benchmarked process and everything it starts.

Memory is sampled twice a second as the sum over the process tree of the resident set (RSS) and
of the proportional set (PSS, ``/proc/<pid>/smaps_rollup``). RSS counts a page shared by several
processes once per process: Spark's Python workers are forked from one daemon and share its
pages, so the RSS sum overstates what such a tree occupies; the PSS sum splits each shared page
between its sharers and adds up to the memory the tree really holds. For one JVM (MirrorMaker 2)
the two are nearly the same. Both are reported, with the tree's processes at the PSS peak.
"""

from __future__ import annotations

import itertools
import resource
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil


@dataclass(frozen=True)
class Sample:
    rss_mb: float
    pss_mb: float
    processes: tuple[tuple[str, float], ...]  # (what, PSS MiB) of every process of the tree


def _what(process: psutil.Process) -> str:
    """A short name: the program and the main class or script it runs."""
    argv = process.cmdline()
    if not argv:
        return str(process.name())
    program = Path(argv[0]).name
    for before, arg in itertools.pairwise(argv):
        if arg.endswith(".py") or arg.startswith("org.apache.") or before == "-m":
            return f"{program} {Path(arg).name}"
    return program


def sample(root: int) -> Sample:
    """RSS and PSS of ``root`` and all its descendants (processes that end meanwhile are skipped)."""
    rss = pss = 0.0
    processes = []
    try:
        tree = [psutil.Process(root)]
        tree += tree[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return Sample(0.0, 0.0, ())
    for process in tree:
        try:
            memory = process.memory_full_info()
            what = _what(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
        rss += memory.rss / 2**20
        pss += memory.pss / 2**20
        processes.append((what, round(memory.pss / 2**20)))
    return Sample(rss, pss, tuple(sorted(processes, key=lambda p: -p[1])))


class Usage(threading.Thread):
    """Started right after a child process: samples its tree's memory; ``finish()`` after it was
    waited for gives CPU seconds (user + system of everything it ran) and the peak memory."""

    def __init__(self, process: subprocess.Popen[Any]) -> None:
        super().__init__(daemon=True)
        self.process, self.running = process, True
        self.peak_rss_mb, self.peak_pss = 0.0, Sample(0.0, 0.0, ())
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu_before = before.ru_utime + before.ru_stime
        self.start()

    def run(self) -> None:
        while self.running and self.process.poll() is None:
            now = sample(self.process.pid)
            self.peak_rss_mb = max(self.peak_rss_mb, now.rss_mb)
            if now.pss_mb > self.peak_pss.pss_mb:
                self.peak_pss = now
            time.sleep(0.5)

    def finish(self) -> dict[str, Any]:
        self.running = False
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "cpu_seconds": round(after.ru_utime + after.ru_stime - self.cpu_before, 1),
            "peak_rss_mb": round(self.peak_rss_mb),
            "peak_pss_mb": round(self.peak_pss.pss_mb),
            "processes_at_peak": [list(p) for p in self.peak_pss.processes],
        }
