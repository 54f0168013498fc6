"""CPU seconds and peak memory of a benchmarked process and everything it starts."""

from __future__ import annotations

import resource
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


def _tree_rss_mb(root: int) -> float:
    """Resident memory of ``root`` and all its descendants, MiB."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue
    total, todo = 0.0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
        except OSError:
            continue
    return total


class Usage(threading.Thread):
    """Started right after a child process: samples its tree's memory; ``finish()`` after it was
    waited for gives CPU seconds (user + system of everything it ran) and the peak memory."""

    def __init__(self, process: subprocess.Popen[Any]) -> None:
        super().__init__(daemon=True)
        self.process, self.peak_rss_mb, self.running = process, 0.0, True
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.cpu_before = before.ru_utime + before.ru_stime
        self.start()

    def run(self) -> None:
        while self.running and self.process.poll() is None:
            self.peak_rss_mb = max(self.peak_rss_mb, _tree_rss_mb(self.process.pid))
            time.sleep(0.5)

    def finish(self) -> dict[str, float]:
        self.running = False
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return {
            "cpu_seconds": round(after.ru_utime + after.ru_stime - self.cpu_before, 1),
            "peak_rss_mb": round(self.peak_rss_mb),
        }
