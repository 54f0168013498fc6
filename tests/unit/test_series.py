"""Samples and aggregates of a metric window (srm/service/series.py), as SRM's REST API returns them."""

from __future__ import annotations

import pytest

from srm.service.series import Window, sample, summary

WINDOW = Window(start_ms=0, end_ms=60_000, samples=3)  # three samples of 20 s


def test_rates_are_per_second_of_each_sample() -> None:
    rows = [(1_000, "", 1, 200), (19_999, "", 1, 200), (20_000, "", 1, 40), (59_999, "", 1, 20)]
    assert sample(rows, WINDOW, "rate") == [(0, 20.0), (20_000, 2.0), (40_000, 1.0)]


def test_rows_outside_the_window_and_empty_samples_are_left_out() -> None:
    rows = [(-1, "", 1, 5), (60_000, "", 1, 5), (45_000, "", 1, 20)]
    assert sample(rows, WINDOW, "rate") == [(40_000, 1.0)]


def test_latencies_are_weighted_by_their_records() -> None:
    rows = [(1_000, "", 3, 10.0), (2_000, "", 1, 50.0), (3_000, "", 0, 999.0)]
    assert sample(rows, WINDOW, "weighted") == [(0, 20.0)]
    assert sample(rows, WINDOW, "mean") == [(0, pytest.approx(353.0))]


def test_lag_is_the_newest_value_of_each_partition_summed() -> None:
    rows = [(1_000, "t/0", 1, 100), (5_000, "t/0", 1, 7), (2_000, "t/1", 1, 3), (25_000, "t/1", 1, 0)]
    assert sample(rows, WINDOW, "gauge") == [(0, 10.0), (20_000, 0.0)]


def test_summary_and_step() -> None:
    assert summary([(0, 1.0), (1, 3.0)]) == {"min": 1.0, "max": 3.0, "avg": 2.0, "sum": 4.0}
    assert summary([]) == {"min": None, "max": None, "avg": None, "sum": None}
    assert Window(0, 10, 3).step_ms == 4 and Window(0, 10, 3).bucket(9) == 2
