"""The benchmarks' shared percentile: nearest rank, a value measured."""

from __future__ import annotations

import pytest

from bench.common import percentile


def test_the_nearest_rank_percentile_is_a_measured_value() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert [percentile(values, q) for q in (1, 50, 99, 100)] == [1.0, 50.0, 99.0, 100.0]
    assert percentile([5.0, 1.0, 3.0], 50) == 3.0  # unsorted input
    assert percentile([7.0], 99) == 7.0
    assert percentile([1.0, 2.0], 99) == 2.0  # the slowest of two is the p99


def test_no_values_is_refused() -> None:
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
