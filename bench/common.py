"""What several benchmarks share: percentiles, and the load Kafka's own producer makes."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``: a value measured, never
    one interpolated between two."""
    if not values:
        raise ValueError("no values to take a percentile of")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def producer_performance_args(bootstrap: str, topic: str, records: int, size: int) -> list[str]:
    """Kafka's ProducerPerformance as fast as it goes: ``records`` of ``size`` bytes into ``topic``,
    acks=all, batches as MirrorMaker 2's producers make them."""
    return [
        *("--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1"),
        *("--bootstrap-server", bootstrap, "--command-property", "acks=all", "linger.ms=10", "batch.size=262144"),
    ]
