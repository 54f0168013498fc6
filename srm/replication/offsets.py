"""The offsets a micro-batch covers, as the plain dict the plan log keeps.

``{"offsets": {topic: {"<partition>": end}}, "ids": {topic: topic_id},
"initial": {topic: {"<partition>": start}}}``: ``offsets`` are exclusive end offsets (the last
stable offset when planned); ``initial`` holds the starting offset of partitions seen for the
first time in this batch, so that a replay of the batch after a crash uses the same start.
"""

from __future__ import annotations

from typing import Any

from srm.replication.job import CopyRange

Offsets = dict[str, Any]
Positions = dict[tuple[str, int], int]


def build(positions: Positions, ids: dict[str, str], initial: Positions | None = None) -> Offsets:
    return {"offsets": _nest(positions), "ids": dict(sorted(ids.items())), "initial": _nest(initial or {})}


def positions(offsets: Offsets, key: str = "offsets") -> Positions:
    return {(t, int(p)): o for t, parts in (offsets.get(key) or {}).items() for p, o in parts.items()}


def _nest(flat: Positions) -> dict[str, dict[str, int]]:
    nested: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(flat.items()):
        nested.setdefault(topic, {})[str(partition)] = offset
    return nested


def topics(offsets: Offsets) -> set[str]:
    return set(offsets.get("offsets") or {}) | set(offsets.get("initial") or {})


def without(offsets: Offsets, dropped: set[str]) -> Offsets:
    """``offsets`` without the topics ``dropped`` (their offsets, ids and starting points)."""
    return {
        **offsets,
        **{
            key: {t: v for t, v in (offsets.get(key) or {}).items() if t not in dropped}
            for key in ("offsets", "ids", "initial")
        },
    }


def same(a: Offsets, b: Offsets) -> bool:
    """Nothing new between two plans (the ``initial`` markers of an earlier batch do not count)."""
    return positions(a) == positions(b) and a.get("ids", {}) == b.get("ids", {})


def ranges(start: Offsets, end: Offsets, remote: dict[str, str]) -> list[CopyRange]:
    """What to copy between two plans: ranges that grew, partitions seen for the first time,
    and topics whose id changed (recreated), whatever their offsets did."""
    begin, finish = positions(start), positions(end)
    first = {**positions(start, "initial"), **positions(end, "initial")}
    old_ids, new_ids = start.get("ids", {}), end.get("ids", {})
    out = []
    for (topic, partition), stop in sorted(finish.items()):
        initial = (topic, partition) in first  # seen for the first time in this or the previous plan
        origin = begin.get((topic, partition), first.get((topic, partition), stop))
        recreated = topic in old_ids and old_ids[topic] != new_ids.get(topic)
        if stop > origin or initial or recreated:
            out.append(CopyRange(topic, partition, origin, stop, new_ids.get(topic, ""), remote[topic], initial))
    return out


def lease_ranges(start: Offsets, end: Offsets, remote: dict[str, str]) -> list[CopyRange]:
    """Continuous mode: every partition of ``end``, from where the previous plan left it (the
    copier resumes from the target's progress anyway), up to its planned end (for the lag)."""
    begin, finish = positions(start), positions(end)
    first = {**positions(start, "initial"), **positions(end, "initial")}
    new_ids = end.get("ids", {})
    out = []
    for (topic, partition), stop in sorted(finish.items()):
        initial = (topic, partition) in first
        origin = begin.get((topic, partition), first.get((topic, partition), stop))
        out.append(CopyRange(topic, partition, origin, stop, new_ids.get(topic, ""), remote[topic], initial))
    return out
