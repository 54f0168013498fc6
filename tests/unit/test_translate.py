"""Exact translation: every example resumes at exactly the first record not yet consumed."""

from __future__ import annotations

import random

import pytest

from srm.offsets.translate import PartitionHistory, to_source, to_target
from srm.replication.runs import OffsetRun, RunTracker

# Source offsets 10..14 copied to 0..4 (transaction 1), a commit marker at target 5, source 15..16
# aborted on the source, 17..19 copied to 6..8 (transaction 2); progress 21 (marker at 20).
HISTORY = PartitionHistory.of([OffsetRun(10, 0, 5), OffsetRun(17, 6, 3)], next_offset=21)


@pytest.mark.parametrize(
    ("upstream", "downstream"),
    [(0, 0), (10, 0), (12, 2), (14, 4), (15, 6), (16, 6), (17, 6), (19, 8), (20, 9), (21, 9), (500, 9)],
)
def test_forward(upstream: int, downstream: int) -> None:
    assert to_target(HISTORY, upstream) == downstream


@pytest.mark.parametrize(
    ("downstream", "upstream"),
    [(0, 10), (4, 14), (5, 17), (6, 17), (8, 19), (9, 21), (100, 21)],
)
def test_backward(downstream: int, upstream: int) -> None:
    assert to_source(HISTORY, downstream) == upstream


def test_nothing_copied_translates_to_nothing() -> None:
    empty = PartitionHistory.of([], next_offset=40)
    assert to_target(empty, 5) is None and to_source(empty, 0) is None


def simulate(rng: random.Random) -> tuple[list[int], list[int], PartitionHistory]:
    """A source partition with gaps (aborts, markers, compaction) copied in transactions."""
    source, offset = [], 0
    for _ in range(rng.randint(1, 300)):
        offset += rng.choice([1, 1, 1, 2, 5])  # gaps on the source
        source.append(offset)
    tracker, target, position = RunTracker(), [], 0
    for i, upstream in enumerate(source):
        if i and rng.random() < 0.1:
            position += 1  # our commit marker on the target
        tracker.add(upstream, position)
        target.append(position)
        position += 1
    return source, target, PartitionHistory.of(tracker.finish(), next_offset=source[-1] + rng.randint(1, 3))


@pytest.mark.parametrize("seed", range(25))
def test_every_position_resumes_exactly(seed: int) -> None:
    rng = random.Random(seed)
    source, target, history = simulate(rng)
    end = target[-1] + 1
    for upstream in range(0, source[-1] + 3):
        remaining = [t for s, t in zip(source, target, strict=True) if s >= upstream]
        # A consumer at the translated position reads exactly the records it had not consumed.
        assert to_target(history, upstream) == (remaining[0] if remaining else end)
    for downstream in range(0, end + 2):
        remaining = [s for s, t in zip(source, target, strict=True) if t >= downstream]
        assert to_source(history, downstream) == (remaining[0] if remaining else history.next_offset)
