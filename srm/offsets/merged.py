"""Offset translation for prefixless active/active topics: ``orders`` on A and on B both hold the
records produced on A and those produced on B, each side in its own order.

A group at offset U of A's partition has read the records produced on A before some point and the
records copied from B before some other point. Its position on B must have exactly those before it:
the copies of A's records read (the flow A->B's runs) and B's own records whose copies on A lie
before U (the flow B->A's runs, read backwards). Each gives an interval of B offsets that holds
exactly its part; where the two overlap the position is exact (0 re-read, 0 skipped), which is the
case whenever the group stopped at a point both copies had passed (at the end of the partition after
the copies caught up, say). Where they do not overlap no offset of B is exact, and the lowest upper
bound is taken: nothing is skipped, the fewest records are read again. Until the flow back has
read the target's own records, which of them came before the group's position is unknown, and the
position is the lowest that skips none of them.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Sequence

from srm.config.model import Flow, SrmConfig
from srm.offsets.translate import PartitionHistory
from srm.replication.runs import OffsetRun


def reverse_flow(config: SrmConfig, flow: Flow) -> Flow | None:
    """The flow target->source when both directions are prefixless with provenance headers; a disabled
    one too: the copies it made are still on the source."""
    if not (flow.prefixless and flow.settings.provenance_headers_enabled):
        return None
    for other in config.flows:
        if (other.source, other.target) == (flow.target, flow.source):
            return other if other.prefixless and other.settings.provenance_headers_enabled else None
    return None


def merged_position(own: PartitionHistory, reverse: PartitionHistory, upstream: int) -> int | None:
    """The offset on the target for a group at ``upstream`` on the source (see the module's note).
    ``own``: the runs of source -> target; ``reverse``: those of target -> source. None when neither
    flow copied anything of the partition; a partition whose records all came from the target has only
    ``reverse``'s runs and is translated by them."""
    if own.empty and reverse.empty:
        return None
    backwards = sorted((OffsetRun(r.target_first, r.source_first, r.length) for r in reverse.runs), key=_first)
    low = max(_after_last_copy(own.runs, upstream), _after_last_copy(backwards, upstream))
    own_next = _first_copy_from(own.runs, upstream)
    reverse_next = _first_copy_from(backwards, upstream)
    high = min(
        own_next if own_next is not None else sys.maxsize,  # no record of the source read later has a copy yet
        reverse_next if reverse_next is not None else _first_unknown(own.runs, reverse.next_offset),
    )
    return low if low <= high else high


def _first_unknown(runs: Sequence[OffsetRun], offset: int) -> int:
    """The first target offset from ``offset`` on that is no copy in ``runs``: the flow back has not read
    it yet, so it may be one of the target's own records, which the group has not read."""
    for run in runs:
        if run.target_first <= offset < run.target_end:
            offset = run.target_end
    return offset


def _first(run: OffsetRun) -> int:
    return run.source_first


def _after_last_copy(runs: Sequence[OffsetRun], upstream: int) -> int:
    """One past the target offset of the last copied record whose source offset is below ``upstream``."""
    index = bisect.bisect_right([r.source_first for r in runs], upstream - 1) - 1
    if index < 0:
        return 0
    run = runs[index]
    return run.target_first + min(upstream, run.source_end) - run.source_first


def _first_copy_from(runs: Sequence[OffsetRun], upstream: int) -> int | None:
    """The target offset of the first copied record whose source offset is ``upstream`` or more."""
    index = bisect.bisect_right([r.source_first for r in runs], upstream) - 1
    if index >= 0 and upstream < runs[index].source_end:
        return runs[index].target_first + upstream - runs[index].source_first
    if index + 1 < len(runs):
        return runs[index + 1].target_first
    return None
