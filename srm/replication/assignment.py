"""Which copy slot copies which source partition: spread by observed load, not by hash alone.

MirrorMaker 2 deals partitions to its tasks round-robin whatever their traffic, so two hot
partitions can share a task while others idle, and its users cannot change that. Here the driver
places partitions by their load (bytes a second, plus a per-record cost), largest first, each on
the slot with the least load so far (longest-processing-time first), ties broken by the number of
partitions; partitions without traffic go where the fewest partitions are, so they are spread
evenly (they may become busy).

A partition changes slots only where two copiers cannot hold it at the same moment:
- available-now: every batch is placed afresh from the records it plans to copy (a batch's tasks
  have committed everything before the next batch starts);
- continuous: within an epoch a partition keeps its slot (a copier hands a partition over only by
  committing it, and the next one must not read its progress before that); new partitions go
  where the fewest partitions are. When the slots' loads drift apart (the busiest slot carries
  REBALANCE_GAIN times what the best placement would give it, and at least REBALANCE_MIN_BYTES_S
  more) and the epoch is at least ``tasks.rebalance.interval.seconds`` old, the driver claims a new epoch (fencing
  every copier, as a tasks.max change does) and places every partition again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

log = logging.getLogger(__name__)

Key = tuple[str, int]
RECORD_COST_BYTES = 64  # a record's own cost (key, headers, its share of the batch) beside its value
QUIET_BYTES_S = 1024.0  # a partition copying less is placed by count, not load
EWMA_WEIGHT = 0.3  # the weight of the newest lease in a partition's observed load
REBALANCE_GAIN = 1.3
REBALANCE_MIN_BYTES_S = 256 * 1024  # below this difference a new epoch's pause costs more than it gains


def balanced(loads: Mapping[Key, float], slots: int) -> dict[Key, int]:
    """Every partition of ``loads`` placed on one of ``slots``: largest load first, each on the slot
    with the least load (then the fewest partitions, then the lowest number); quiet ones on the
    slot with the fewest partitions."""
    totals = [0.0] * slots
    counts = [0] * slots
    placed = {}
    for key in sorted(loads, key=lambda k: (-loads[k], k)):
        if loads[key] > QUIET_BYTES_S:
            slot = min(range(slots), key=lambda s: (totals[s], counts[s], s))
        else:  # next to nothing to copy now, but it may come: the slots hold as many of them
            slot = min(range(slots), key=lambda s: (counts[s], totals[s], s))
        placed[key] = slot
        totals[slot] += loads[key]
        counts[slot] += 1
    return placed


def slot_loads(placement: Mapping[Key, int], loads: Mapping[Key, float], slots: int) -> list[float]:
    totals = [0.0] * slots
    for key, slot in placement.items():
        totals[slot] += loads.get(key, 0.0)
    return totals


class Assignment:
    """A flow's placement of partitions on slots in continuous mode, with their observed loads."""

    def __init__(self, flow: str = "") -> None:
        self.flow = flow
        self.loads: dict[Key, float] = {}  # bytes a second, EWMA over leases
        self.placement: dict[Key, int] = {}
        self.epoch = -1
        self.slots = 0
        self.since = 0.0  # monotonic time the epoch's placement was made

    def observe(self, rows: Iterable[Mapping[str, Any]], seconds: float) -> None:
        """A lease's payload rows (partitions without records are left out of them: load 0); each
        over its own time (``started_ms`` to ``finished_ms``), else ``seconds``."""
        seen: dict[Key, float] = {}
        for row in rows:
            key = (str(row["topic"]), int(row["partition"]))
            took = (int(row.get("finished_ms") or 0) - int(row.get("started_ms") or 0)) / 1000
            took = took if took > 0 else seconds
            if took <= 0:
                continue
            size = int(row["bytes"]) + RECORD_COST_BYTES * int(row["records"])
            seen[key] = seen.get(key, 0.0) + size / took
        for key in self.placement:
            before = self.loads.get(key)
            now = seen.get(key, 0.0)
            self.loads[key] = now if before is None else (1 - EWMA_WEIGHT) * before + EWMA_WEIGHT * now

    def place(self, keys: Iterable[Key], epoch: int, slots: int, now: float) -> dict[Key, int]:
        """The slot of each of ``keys`` for the epoch's next lease: kept within an epoch, new ones
        where the fewest partitions are (their load is not known yet); all placed afresh in a new
        epoch. A partition that leaves (its topic deleted, a list edited) is forgotten, so what is
        kept is bounded by the flow's partitions; should it come back in the same epoch it may get
        another slot, which is safe: every slot has a task in every lease, and a copier commits and
        lets go of the partitions its renewal no longer names before its lease ends, so before the
        next lease gives them to another slot."""
        keys = list(keys)
        if epoch != self.epoch or slots != self.slots:
            self.placement = balanced({k: self.loads.get(k, 0.0) for k in keys}, slots)
            self.epoch, self.slots, self.since = epoch, slots, now
            log.info("flow %s: epoch %d places the partitions by load: %s", self.flow, epoch, self.describe())
            return dict(self.placement)
        wanted = set(keys)
        self.placement = {k: s for k, s in self.placement.items() if k in wanted}
        self.loads = {k: v for k, v in self.loads.items() if k in wanted}
        totals = slot_loads(self.placement, self.loads, slots)
        counts = [0] * slots
        for slot in self.placement.values():
            counts[slot] += 1
        found = sorted(k for k in keys if k not in self.placement)
        for key in found:
            slot = min(range(slots), key=lambda s: (counts[s], totals[s], s))
            self.placement[key] = slot
            counts[slot] += 1
        if found:
            log.info(
                "flow %s: epoch %d places %d partition(s) found within it by count: %s",
                *(self.flow, epoch, len(found), self.describe()),
            )
        return dict(self.placement)

    def describe(self, shown: int = 4) -> str:
        """Each slot's partitions and load, for the log."""
        parts = []
        for slot in range(self.slots):
            keys = sorted((k for k, s in self.placement.items() if s == slot), key=lambda k: (-self.loads.get(k, 0), k))
            load = sum(self.loads.get(k, 0.0) for k in keys)
            names = ", ".join(f"{t}[{p}]" for t, p in keys[:shown]) + (", ..." if len(keys) > shown else "")
            parts.append(f"slot {slot}: {len(keys)} partition(s), {load / 1024:,.0f} KiB/s ({names})")
        return "; ".join(parts)

    def drift(self, now: float, every_s: float) -> str | None:
        """Why the partitions should be placed again (a new epoch), or None. ``every_s``: the least
        age of the epoch's placement (tasks.rebalance.interval.seconds; 0: never)."""
        if self.slots < 2 or every_s <= 0 or now - self.since < every_s:
            return None
        current = max(slot_loads(self.placement, self.loads, self.slots))
        better = balanced({k: self.loads.get(k, 0.0) for k in self.placement}, self.slots)
        best = max(slot_loads(better, self.loads, self.slots))
        if current >= REBALANCE_GAIN * best and current - best >= REBALANCE_MIN_BYTES_S:
            return (
                f"the busiest slot copies {current / 1024:,.0f} KiB/s where a new placement gives it "
                f"{best / 1024:,.0f} KiB/s"
            )
        return None
