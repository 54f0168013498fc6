"""Timing a copy the same way for every replicator: from the first record written to the target
until the last one is visible, by polling the target topics' end offsets.

The start is the first high watermark above 0 (read_uncommitted: a transactional writer's records
count as written before their commit, so ours is not credited with the time its first
transaction is open); the end is the last stable offset (read_committed) reaching ``expected``,
when a read_committed consumer could read everything. A transactional writer's end offsets also
count one commit marker per transaction and partition: ``expected`` is reached at most a few
markers early, noise at the benchmarks' sizes (thousands of records per transaction).
"""

from __future__ import annotations

import threading
import time
from typing import Any

from srm import clients
from srm.config.model import Cluster
from srm.errors import SrmError
from srm.topics import list_offsets, partition_counts

POLL_S = 0.1


def visible_records(
    admin: Any, topics: dict[str, int], *, committed: bool = True, present: list[tuple[str, int]] | None = None
) -> int:
    """Sum of the end offsets of the ``topics`` (name -> partitions) that exist with all their
    partitions: last stable offsets, or high watermarks with ``committed=False``. ``present``: the
    partitions known to exist (the metadata is not asked again)."""
    present = present if present is not None else present_partitions(admin, topics)
    if not present:
        return 0
    try:
        ends = list_offsets(admin, present, "latest", read_committed=committed)
    except SrmError:  # just created: leaders are still being elected
        return 0
    return sum(ends.values())


def present_partitions(admin: Any, topics: dict[str, int]) -> list[tuple[str, int]]:
    """The partitions of those of ``topics`` (name -> partitions) that exist with all their partitions."""
    counts = partition_counts(admin)
    return [(t, p) for t, n in topics.items() if counts.get(t) == n for p in range(n)]


class TargetWatch(threading.Thread):
    """Started before the replicator: notes when the first record and when ``expected`` records
    are visible in ``topics`` (name -> partitions) on ``target``."""

    def __init__(self, target: Cluster, topics: dict[str, int], expected: int) -> None:
        super().__init__(daemon=True)
        self.admin = clients.admin_client(target)
        self.topics, self.expected = topics, expected
        self.started = time.monotonic()
        self.first: float | None = None
        self.done: float | None = None
        self.seen = 0
        self.slowest_poll = 0.0  # the figures' resolution: a poll's own time, plus POLL_S
        self._stop_event = threading.Event()
        self.start()

    def run(self) -> None:
        everything = [(t, p) for t, n in self.topics.items() for p in range(n)]
        present: list[tuple[str, int]] = []
        while not self._stop_event.is_set():
            began = time.monotonic()
            if len(present) < len(everything):  # once all exist, their metadata is not asked again
                present = present_partitions(self.admin, self.topics)
            if self.first is None and visible_records(self.admin, self.topics, committed=False, present=present):
                self.first = time.monotonic()
            self.seen = visible_records(self.admin, self.topics, present=present)
            now = time.monotonic()
            self.slowest_poll = max(self.slowest_poll, now - began)
            if self.seen >= self.expected:
                self.done = now
                return
            time.sleep(POLL_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)

    @property
    def copy_seconds(self) -> float | None:
        """First record written to the target until the last is visible (None until it is)."""
        if self.first is None or self.done is None:
            return None
        return max(self.done - self.first, POLL_S)

    def figures(self, records: int, size: int) -> dict[str, Any]:
        copy_s = self.copy_seconds
        return {
            "first_record_after_s": round(self.first - self.started, 2) if self.first else None,
            "copy_seconds": round(copy_s, 2) if copy_s else None,
            "copy_records_per_s": round(records / copy_s) if copy_s else None,
            "copy_mb_per_s": round(records * size / 1e6 / copy_s, 1) if copy_s else None,
            "poll_resolution_s": round(self.slowest_poll + POLL_S, 2),
        }
