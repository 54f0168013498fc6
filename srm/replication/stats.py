"""Latency statistics of a partition's batch: min/avg/max exactly, p99 from a bounded sample.

The copy loop hands over whole lists (``add_ages``): count, sum, min and max come from C builtins
instead of a Python call per record, which the profile of the copy loop showed costing about a
sixth of a task's time at 100-byte records (bench/REPORT.md, "Profile").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

# Enough values for a stable p99 (the 1% above it are 20-40 values) while the memory per partition
# stays small.
SAMPLE_SIZE = 4096


@dataclass
class LatencyStats:
    """The sample holds every ``stride``-th value seen (the values at positions 0, stride, 2 x
    stride, ...): spread evenly over the whole batch, as the records came. Before it would pass
    SAMPLE_SIZE values it keeps every other one and the stride doubles. A slice picks a batch's
    share at C speed; a random reservoir drew two random numbers per replaced value (9% of the copy
    tasks' time under cProfile at 100-byte records, bench/REPORT.md "Profile")."""

    count: int = 0
    total: float = 0.0
    minimum: float | None = None
    maximum: float | None = None
    _sample: list[float] = field(default_factory=list, repr=False)
    _stride: int = field(default=1, repr=False)

    def add_ages(self, now_ms: float, timestamps_ms: Sequence[int]) -> None:
        """Add ``now_ms - t`` for every timestamp ``t`` (a batch of records seen at ``now_ms``)."""
        n = len(timestamps_ms)
        if not n:
            return
        before = self.count
        self.count += n
        self.total += n * now_ms - sum(timestamps_ms)
        low, high = now_ms - max(timestamps_ms), now_ms - min(timestamps_ms)
        self.minimum = low if self.minimum is None or low < self.minimum else self.minimum
        self.maximum = high if self.maximum is None or high > self.maximum else self.maximum
        # Thinned before the batch is added, so at most SAMPLE_SIZE values are ever held: the batch
        # adds at most n // stride + 1. Thinning keeps the values at the multiples of twice the stride.
        while len(self._sample) + n // self._stride >= SAMPLE_SIZE:
            self._sample = self._sample[::2]
            self._stride *= 2
        # The batch's first value has position ``before``: the first one sampled is the next
        # multiple of the stride.
        self._sample.extend(now_ms - t for t in timestamps_ms[-before % self._stride :: self._stride])

    @property
    def average(self) -> float | None:
        return self.total / self.count if self.count else None

    def percentile(self, q: float) -> float | None:
        if not self._sample:
            return None
        ordered = sorted(self._sample)
        rank = math.ceil(q / 100 * len(ordered))  # nearest-rank percentile
        return ordered[min(len(ordered), max(1, rank)) - 1]

    def summary(self, prefix: str) -> dict[str, float | None]:
        return {
            f"{prefix}_min_ms": self.minimum,
            f"{prefix}_avg_ms": self.average,
            f"{prefix}_max_ms": self.maximum,
            f"{prefix}_p99_ms": self.percentile(99),
        }
