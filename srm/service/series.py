"""A metric over a time window, as SRM's REST API returns it: samples plus min, max, avg and sum.

Pure functions over rows already read: a row is ``(time_ms, key, weight, value)`` where ``key``
names what the value belongs to (a partition, for gauges such as lag), ``weight`` how many records
it covers (for averages such as latency) and ``value`` the measured figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

# How rows of one sample combine into its value:
#   rate     - sum of values / sample seconds (records or bytes per second)
#   weighted - average of values weighted by their records (latency, record age)
#   mean     - plain average (checkpoint latency: one row per group partition)
#   gauge    - per key the newest value, summed over keys (lag of every partition)
Combine = Literal["rate", "weighted", "mean", "gauge"]
Row = tuple[int, str, float, float]
MAX_SAMPLES = 1000


@dataclass(frozen=True)
class Window:
    start_ms: int
    end_ms: int
    samples: int

    @property
    def step_ms(self) -> int:
        return max(1, -(-(self.end_ms - self.start_ms) // self.samples))

    def bucket(self, time_ms: int) -> int | None:
        if not self.start_ms <= time_ms < self.end_ms:
            return None
        return (time_ms - self.start_ms) // self.step_ms


def sample(rows: Iterable[Row], window: Window, combine: Combine) -> list[tuple[int, float]]:
    """``(sample start ms, value)`` for every sample of ``window`` that holds rows, oldest first."""
    buckets: dict[int, list[Row]] = {}
    for row in rows:
        index = window.bucket(row[0])
        if index is not None:
            buckets.setdefault(index, []).append(row)
    return [
        (window.start_ms + index * window.step_ms, _combine(buckets[index], combine, window.step_ms))
        for index in sorted(buckets)
    ]


def _combine(rows: list[Row], combine: Combine, step_ms: int) -> float:
    if combine == "rate":
        return sum(r[3] for r in rows) * 1000 / step_ms
    if combine == "weighted":
        weight = sum(r[2] for r in rows)
        return sum(r[2] * r[3] for r in rows) / weight if weight else 0.0
    if combine == "mean":
        return sum(r[3] for r in rows) / len(rows)
    newest: dict[str, Row] = {}
    for row in rows:
        if row[1] not in newest or row[0] >= newest[row[1]][0]:
            newest[row[1]] = row
    return sum(r[3] for r in newest.values())


def summary(points: list[tuple[int, float]]) -> dict[str, float | None]:
    """SRM's aggregates of a series; None for an empty one."""
    values = [v for _, v in points]
    if not values:
        return {"min": None, "max": None, "avg": None, "sum": None}
    return {"min": min(values), "max": max(values), "avg": sum(values) / len(values), "sum": sum(values)}
