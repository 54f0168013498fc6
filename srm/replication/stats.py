"""Latency statistics of a partition's batch: min/avg/max exactly, p99 from a bounded sample."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

# Enough values for a stable p99 while the memory per partition stays a few hundred KiB.
SAMPLE_SIZE = 20_000


@dataclass
class LatencyStats:
    count: int = 0
    total: float = 0.0
    minimum: float | None = None
    maximum: float | None = None
    _sample: list[float] = field(default_factory=list, repr=False)
    _rng: random.Random = field(default_factory=lambda: random.Random(7), repr=False)

    def add(self, value_ms: float) -> None:
        self.count += 1
        self.total += value_ms
        self.minimum = value_ms if self.minimum is None or value_ms < self.minimum else self.minimum
        self.maximum = value_ms if self.maximum is None or value_ms > self.maximum else self.maximum
        if len(self._sample) < SAMPLE_SIZE:
            self._sample.append(value_ms)
        else:  # reservoir sampling keeps a uniform sample of everything seen
            slot = self._rng.randrange(self.count)
            if slot < SAMPLE_SIZE:
                self._sample[slot] = value_ms

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
