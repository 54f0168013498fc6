"""Offset runs: which source offset became which target offset, exactly and compactly.

A *run* is a maximal sequence of copied records whose source offsets and target offsets both
advance by exactly one from record to record, stored as (first source offset, first target
offset, length). Any gap ends a run: on the source (aborted transactions, commit markers,
compaction) or on the target (our own commit markers, one per transaction). With the runs of a
partition, translation is exact: a source offset U inside a run maps to ``target_first +
(U - source_first)``; U in a gap maps to the first target offset of the next run.

MM2's offset-syncs topic gets OffsetSyncs on MM2's own schedule (:class:`SyncPacer`): exact
translation uses the runs, MM2 tooling reading that topic sees what MM2 would have written.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice


@dataclass(frozen=True)
class OffsetRun:
    source_first: int
    target_first: int
    length: int

    @property
    def source_end(self) -> int:
        """One past the last source offset of the run."""
        return self.source_first + self.length

    @property
    def target_end(self) -> int:
        return self.target_first + self.length


class RunTracker:
    """Collects (source offset, target offset) pairs of one partition, in order, into runs."""

    def __init__(self) -> None:
        self.runs: list[OffsetRun] = []
        self._first: tuple[int, int] | None = None
        self._last: tuple[int, int] | None = None
        self._length = 0

    def add(self, source_offset: int, target_offset: int) -> None:
        if self._last is not None:
            last_source, last_target = self._last
            if source_offset <= last_source or target_offset <= last_target:
                raise ValueError(
                    f"offsets must increase: ({source_offset}, {target_offset}) after ({last_source}, {last_target})"
                )
            if source_offset == last_source + 1 and target_offset == last_target + 1:
                self._last = (source_offset, target_offset)
                self._length += 1
                return
            self._close()
        self._first = self._last = (source_offset, target_offset)
        self._length = 1

    def extend(self, sources: Sequence[int], targets: Sequence[int]) -> None:
        """``add`` for aligned lists of pairs, in O(runs x log n) Python steps instead of O(n): a
        slice whose first and last pairs are as far apart as its length on both sides is a
        run, because both sides strictly increase (checked at C speed)."""
        if len(sources) != len(targets):
            raise ValueError(f"{len(sources)} source offsets but {len(targets)} target offsets")
        if not sources:
            return
        for side, offsets in (("source", sources), ("target", targets)):
            if not all(map(operator.lt, offsets, islice(offsets, 1, None))):
                raise ValueError(f"{side} offsets must increase")
        todo = [(0, len(sources) - 1)]
        while todo:
            lo, hi = todo.pop()
            if sources[hi] - sources[lo] == hi - lo and targets[hi] - targets[lo] == hi - lo:
                self._extend_run(sources[lo], targets[lo], hi - lo + 1)
            else:
                mid = (lo + hi) // 2
                todo += [(mid + 1, hi), (lo, mid)]  # the lower half first: pairs stay in order

    def _extend_run(self, source_first: int, target_first: int, length: int) -> None:
        """Add ``length`` consecutive pairs starting at (source_first, target_first)."""
        self.add(source_first, target_first)
        if length > 1:
            self._length += length - 1
            self._last = (source_first + length - 1, target_first + length - 1)

    def _close(self) -> None:
        if self._first is not None:
            self.runs.append(OffsetRun(self._first[0], self._first[1], self._length))
        self._first = self._last = None
        self._length = 0

    def finish(self) -> list[OffsetRun]:
        """Close the open run and return every run collected so far (and forget them)."""
        self._close()
        runs, self.runs = self.runs, []
        return runs

    @property
    def last(self) -> tuple[int, int] | None:
        """The most recent (source, target) pair, or None if nothing was added since ``finish``."""
        return self._last


@dataclass
class SyncPacer:
    """When MM2 emits an OffsetSync for a partition (Kafka 4.x ``OffsetSyncWriter.PartitionState``).

    A record gets a sync when it is the first since the pacer started, when its upstream offset is
    not the previous one + 1 (a gap: aborted transactions, markers, compaction), when its downstream
    offset went backwards, or when it is ``offset.lag.max`` or more past the last sync + 1 (MM2
    translates an offset past a sync to sync + 1, so that bounds how stale a translation is). With
    0 every record gets one. Within a run both sides advance by one, so only staleness can fire
    there and the synced records are computed per run, not per record.
    """

    lag_max: int
    last_synced: int = -1  # downstream offset of the last sync; -1: none since the start
    previous: tuple[int, int] | None = None  # the last (upstream, downstream) pair seen

    def syncs(self, runs: list[OffsetRun]) -> list[tuple[int, int]]:
        """(upstream, downstream) of the records of ``runs`` (in order) that get a sync."""
        out: list[tuple[int, int]] = []
        for run in runs:
            if self._due(run.source_first, run.target_first):
                out.append((run.source_first, run.target_first))
                self.last_synced = run.target_first
            due = self.last_synced + 1 + self.lag_max
            while due < run.target_end:
                out.append((run.source_first + due - run.target_first, due))
                self.last_synced, due = due, due + 1 + self.lag_max
            self.previous = (run.source_end - 1, run.target_end - 1)
        return out

    def _due(self, upstream: int, downstream: int) -> bool:
        if self.last_synced < 0 or self.previous is None:
            return True
        skipped = upstream - self.previous[0] != 1
        truncated = downstream < self.previous[1]
        return skipped or truncated or downstream - (self.last_synced + 1) >= self.lag_max
