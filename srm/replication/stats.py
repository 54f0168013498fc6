"""Latency statistics of a partition's batch: min/avg/max exactly, p99 from a bounded sample.

The copy loop hands over whole lists (``add_ages``): count, sum, min and max come from C builtins
instead of a Python call per record, which the profile of the copy loop showed costing about a
sixth of a task's time at 100-byte records (bench/REPORT.md, "Profile").
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

# Enough values for a stable p99 (the 1% above it are ~40 values) while the memory per partition
# stays small and few samples are replaced (the copy profile showed the replacements' random
# numbers at 20,000 samples costing ~10% of a task's Python time).
SAMPLE_SIZE = 4096


@dataclass
class LatencyStats:
    count: int = 0
    total: float = 0.0
    minimum: float | None = None
    maximum: float | None = None
    _sample: list[float] = field(default_factory=list, repr=False)
    _rng: random.Random = field(default_factory=lambda: random.Random(7), repr=False)

    def add_ages(self, now_ms: float, timestamps_ms: list[int]) -> None:
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
        room = SAMPLE_SIZE - len(self._sample)
        if room > 0:
            self._sample.extend(now_ms - t for t in timestamps_ms[:room])
            before += min(room, n)
            timestamps_ms = timestamps_ms[room:]
        if not timestamps_ms:
            return
        # Reservoir sampling in bulk: the i-th value seen replaces a sample with probability
        # SAMPLE_SIZE / i, so a batch from ``before`` to ``count`` makes about
        # SAMPLE_SIZE * ln(count / before) replacements, of values drawn uniformly from it.
        expected = SAMPLE_SIZE * math.log(self.count / before)
        replacements = min(len(timestamps_ms), int(expected) + (self._rng.random() < expected % 1))
        for t in self._rng.sample(timestamps_ms, replacements):
            self._sample[self._rng.randrange(SAMPLE_SIZE)] = now_ms - t

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
