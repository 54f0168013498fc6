"""Translation between the two sides of a prefixless active/active topic, against a simulation of
both clusters' partitions: exact wherever an exact offset exists, and never skipping a record."""

from __future__ import annotations

import random

from srm.offsets.merged import merged_position
from srm.offsets.translate import PartitionHistory
from srm.replication.runs import RunTracker

Record = tuple[str, int]  # (origin, number)


class Pair:
    """One partition of ``orders`` on A and on B, written on both sides, copied both ways with provenance."""

    def __init__(self) -> None:
        self.logs: dict[str, list[Record]] = {"A": [], "B": []}
        self.pairs: dict[str, list[tuple[int, int]]] = {"A": [], "B": []}  # flow from X: (offset on X, on other)
        self.progress = {"A": 0, "B": 0}  # next offset of X the flow X -> other reads

    def produce(self, side: str, count: int) -> None:
        start = sum(1 for origin, _ in self.logs[side] if origin == side)
        self.logs[side] += [(side, start + n) for n in range(count)]

    def copy(self, side: str) -> None:
        other = "B" if side == "A" else "A"
        source, target = self.logs[side], self.logs[other]
        for offset in range(self.progress[side], len(source)):
            if source[offset][0] == side:  # the provenance rule: records from the other side stay
                self.pairs[side].append((offset, len(target)))
                target.append(source[offset])
        self.progress[side] = len(source)

    def history(self, side: str) -> PartitionHistory:
        tracker = RunTracker()
        for upstream, downstream in self.pairs[side]:
            tracker.add(upstream, downstream)
        return PartitionHistory.of(tracker.finish(), self.progress[side])


def scenarios(count: int) -> list[Pair]:
    rng = random.Random(7)
    out = []
    for _ in range(count):
        pair = Pair()
        for _ in range(rng.randint(1, 12)):
            action = rng.choice(("produce A", "produce B", "copy A", "copy B"))
            if action.startswith("produce"):
                pair.produce(action[-1], rng.randint(1, 4))
            else:
                pair.copy(action[-1])
        out.append(pair)
    return out


def test_a_group_moves_to_the_other_side_exactly_when_it_can_and_never_skips() -> None:
    exact = inexact = 0
    for pair in scenarios(400):
        for side, other in (("A", "B"), ("B", "A")):
            own, reverse = pair.history(side), pair.history(other)
            if own.empty and reverse.empty:
                continue
            here, there = pair.logs[side], pair.logs[other]
            for upstream in range(len(here) + 1):
                read = set(here[:upstream])
                position = merged_position(own, reverse, upstream)
                assert position is not None and 0 <= position <= len(there)
                before = set(there[:position])
                assert before <= read, (here, there, upstream, position)  # nothing skipped
                possible = [d for d in range(len(there) + 1) if set(there[:d]) == read & set(there)]
                if possible:
                    assert position in possible, (here, there, upstream, position, possible)
                    exact += 1
                else:
                    inexact += 1
    assert exact > 1000 and inexact > 100  # both cases were exercised


def test_after_both_copies_caught_up_the_end_maps_to_the_end() -> None:
    pair = Pair()
    for side in ("A", "B", "A", "B"):
        pair.produce(side, 3)
        pair.copy("A")
        pair.produce("B", 2)
        pair.copy("B")
    pair.copy("A")
    pair.copy("B")
    assert len(pair.logs["A"]) == len(pair.logs["B"])
    end = len(pair.logs["A"])
    assert merged_position(pair.history("A"), pair.history("B"), end) == end
    assert merged_position(pair.history("B"), pair.history("A"), end) == end
