"""Offset runs: which source offset became which target offset, exactly and compactly.

A *run* is a maximal sequence of copied records whose source offsets and target offsets both
advance by exactly one from record to record, stored as (first source offset, first target
offset, length). Any gap ends a run: on the source (aborted transactions, commit markers,
compaction) or on the target (our own commit markers, one per transaction). With the runs of a
partition, translation is exact: a source offset U inside a run maps to ``target_first +
(U - source_first)``; U in a gap maps to the first target offset of the next run.

The tracker also decides when to emit an MM2 OffsetSync: at the first record of each run (that
is where downstream - upstream can change) and for the last record of a transaction.
"""

from __future__ import annotations

import operator
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

    def extend(self, sources: list[int], targets: list[int]) -> None:
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


def mm2_syncs(runs: list[OffsetRun]) -> list[tuple[int, int]]:
    """(upstream, downstream) pairs for MM2's offset-syncs topic: each run's first record and the
    last record overall, in order and without repeats."""
    pairs = [(run.source_first, run.target_first) for run in runs]
    if runs:
        last = runs[-1]
        end = (last.source_end - 1, last.target_end - 1)
        if end != pairs[-1]:
            pairs.append(end)
    return pairs
