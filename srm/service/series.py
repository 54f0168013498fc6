"""A metric over a time window, as SRM's REST API returns it: samples plus min, max, avg and sum.

Pure functions over rows already read: a row is ``(time_ms, key, weight, value)`` where ``key``
names what the value belongs to (a partition, for gauges such as lag), ``weight`` how many records
it covers (for averages such as latency) and ``value`` the measured figure.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from srm.storage.warehouse import HOUR_MS

# How rows of one sample combine into its value:
#   rate     - sum of values / sample seconds (records or bytes per second)
#   weighted - average of values weighted by their records (latency, record age)
#   mean     - average of rows (checkpoint latency: one row per group partition); a row's weight is
#              how many rows it stands for (1, or an hour's count in the hourly rollup)
#   gauge    - per key the newest value (of values at the same time, the largest), summed over keys
#              (lag of every partition)
# Each combines partial results exactly: an hour's rows rolled up into a sum, a weighted average
# with its weight or the newest value with its time sample as those rows would.
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

    @property
    def whole_hours(self) -> bool:
        """Whether every sample is whole hours: samples an hourly rollup can serve."""
        return self.start_ms % HOUR_MS == 0 and self.step_ms % HOUR_MS == 0


def in_hours(window: Window) -> Window | None:
    """``window`` in whole hours when its samples span an hour or more, else None: the start floored
    to the hour, the step rounded up to whole hours and the end where the last sample ends (at or
    after the asked end). Flooring the start may add a sample; past MAX_SAMPLES the step grows."""
    if window.step_ms < HOUR_MS:
        return None
    start = window.start_ms // HOUR_MS * HOUR_MS
    step = -(-window.step_ms // HOUR_MS) * HOUR_MS
    while -(-(window.end_ms - start) // step) > MAX_SAMPLES:
        step += HOUR_MS
    samples = -(-(window.end_ms - start) // step)
    return Window(start, start + samples * step, samples)


def sample(rows: Iterable[Row], window: Window, combine: Combine) -> list[tuple[int, float]]:
    """``(sample start ms, value)`` for every sample of ``window`` that holds rows, oldest first."""
    import numpy as np

    listed = list(rows)
    keys = {key: code for code, key in enumerate(sorted({r[1] for r in listed}))}
    columns = (
        np.array([r[0] for r in listed], dtype=np.int64),
        np.array([keys[r[1]] for r in listed], dtype=np.int64),
        np.array([r[2] for r in listed], dtype=np.float64),
        np.array([r[3] for r in listed], dtype=np.float64),
    )
    return sample_arrays(columns, window, combine)


def sample_arrays(columns: tuple[Any, Any, Any, Any], window: Window, combine: Combine) -> list[tuple[int, float]]:
    """:func:`sample` over numpy arrays (times in ms, integer key codes, weights, values): what the
    API serves, vectorized."""
    import numpy as np

    times, keys, weights, values = columns
    inside = (times >= window.start_ms) & (times < window.end_ms)
    times, keys, weights, values = times[inside], keys[inside], weights[inside], values[inside]
    index = (times - window.start_ms) // window.step_ms
    counts = np.bincount(index, minlength=window.samples)

    def per_sample(weights: Any) -> Any:
        return np.bincount(index, weights=weights, minlength=window.samples).astype(np.float64)

    if combine == "rate":
        result = per_sample(values) * 1000 / window.step_ms
    elif combine == "weighted":
        total, weighted = per_sample(weights), per_sample(weights * values)
        result = np.divide(weighted, total, out=np.zeros(window.samples), where=total > 0)
    elif combine == "mean":
        rows = per_sample(weights)
        result = np.divide(per_sample(weights * values), rows, out=np.zeros(window.samples), where=rows > 0)
    else:  # gauge: per sample and key the newest value (ties: the largest), summed over keys
        order = np.lexsort((values, times, keys, index))
        index, keys, values = index[order], keys[order], values[order]
        last = np.ones(len(index), dtype=bool)
        last[:-1] = (index[1:] != index[:-1]) | (keys[1:] != keys[:-1])
        result = np.bincount(index[last], weights=values[last], minlength=window.samples).astype(np.float64)
    return [(window.start_ms + int(i) * window.step_ms, float(result[i])) for i in np.flatnonzero(counts)]


def summary(points: list[tuple[int, float]]) -> dict[str, float | None]:
    """SRM's aggregates of a series; None for an empty one."""
    values = [v for _, v in points]
    if not values:
        return {"min": None, "max": None, "avg": None, "sum": None}
    return {"min": min(values), "max": max(values), "avg": sum(values) / len(values), "sum": sum(values)}
