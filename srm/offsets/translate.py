"""Exact offset translation over a partition's offset runs (see :mod:`srm.replication.runs`).

Forward (source -> target), for a consumer that will read from source offset U:
the target offset of the first replicated record whose source offset is >= U. Inside a run that
is ``target_first + (U - source_first)``; in a gap before a run, that run's ``target_first``;
past the last run (nothing at or after U replicated yet), the target end of what is replicated,
so a consumer starting there misses nothing. With no run at all there is nothing to translate.

Backward (target -> source), for a consumer of the remote topic at target offset V going back:
the source offset of the first replicated record whose target offset is >= V; past the last run,
the flow's progress (the next source offset to copy), so records not yet replicated are read on
the source and nothing replicated is read twice.

Both directions are monotonic in their input and never return a position that skips a record.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from srm.replication.runs import OffsetRun


@dataclass(frozen=True)
class PartitionHistory:
    """The runs of one source partition (one topic incarnation), sorted, and the flow's progress."""

    runs: tuple[OffsetRun, ...]
    next_offset: int  # next source offset the flow will copy; >= the last run's source end

    @classmethod
    def of(cls, runs: Sequence[OffsetRun], next_offset: int | None = None) -> PartitionHistory:
        ordered = tuple(sorted(runs, key=lambda r: r.source_first))
        end = ordered[-1].source_end if ordered else 0
        return cls(ordered, max(end, next_offset or 0))

    @property
    def empty(self) -> bool:
        return not self.runs

    @cached_property
    def source_firsts(self) -> list[int]:
        """The runs' first source offsets (the bisect keys of ``to_target``), computed once."""
        return [r.source_first for r in self.runs]

    @cached_property
    def by_target(self) -> tuple[list[OffsetRun], list[int]]:
        """The runs sorted by target offset and their first target offsets (for ``to_source``)."""
        ordered = sorted(self.runs, key=lambda r: r.target_first)
        return ordered, [r.target_first for r in ordered]


def to_target(history: PartitionHistory, upstream: int) -> int | None:
    """Target offset to resume at for a group at source offset ``upstream``; None if nothing was copied."""
    runs = history.runs
    if not runs:
        return None
    index = bisect.bisect_right(history.source_firsts, upstream) - 1
    if index >= 0 and upstream < runs[index].source_end:
        run = runs[index]
        return run.target_first + (upstream - run.source_first)
    following = index + 1
    if following < len(runs):
        return runs[following].target_first
    return runs[-1].target_end


def to_source(history: PartitionHistory, downstream: int) -> int | None:
    """Source offset to resume at for a group at target offset ``downstream``; None if nothing was copied."""
    runs, firsts = history.by_target
    if not runs:
        return None
    index = bisect.bisect_right(firsts, downstream) - 1
    if index >= 0 and downstream < runs[index].target_end:
        run = runs[index]
        return run.source_first + (downstream - run.target_first)
    following = index + 1
    if following < len(runs):
        return runs[following].source_first
    return history.next_offset
