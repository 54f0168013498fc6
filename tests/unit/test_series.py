"""Samples and aggregates of a metric window (srm/service/series.py), as SRM's REST API returns them."""

from __future__ import annotations

import pytest

from srm.service.series import MAX_SAMPLES, Window, in_hours, sample, summary
from srm.storage.warehouse import HOUR_MS

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


def test_a_mean_counts_each_row_as_the_rows_it_stands_for() -> None:
    raw = [(1_000, "", 1, 10.0), (2_000, "", 1, 50.0), (3_000, "", 1, 999.0)]
    assert sample(raw, WINDOW, "mean") == [(0, pytest.approx(353.0))]
    # the same rows as an hourly rollup holds them: a mean of two rows and one row
    assert sample([(0, "", 2, 30.0), (3_000, "", 1, 999.0)], WINDOW, "mean") == [(0, pytest.approx(353.0))]


def test_lag_is_the_newest_value_of_each_partition_summed() -> None:
    rows = [(1_000, "t/0", 1, 100), (5_000, "t/0", 1, 7), (2_000, "t/1", 1, 3), (25_000, "t/1", 1, 0)]
    assert sample(rows, WINDOW, "gauge") == [(0, 10.0), (20_000, 0.0)]


def test_of_lags_measured_at_the_same_moment_the_largest_is_the_newest() -> None:
    rows = [(5_000, "t/0", 1, 7), (5_000, "t/0", 1, 70), (1_000, "t/1", 1, 3)]
    assert sample(rows, WINDOW, "gauge") == sample(rows[::-1], WINDOW, "gauge") == [(0, 73.0)]


def test_samples_of_an_hour_or_more_are_aligned_to_whole_hours() -> None:
    h = HOUR_MS
    assert in_hours(Window(10 * h + 17 * 60_000, 40 * h + 17 * 60_000, 30)) == Window(10 * h, 41 * h, 31)
    aligned = in_hours(Window(10 * h + 17 * 60_000, 18 * h + 3 * 60_000, 3))  # samples of 2.6 h: 3 h
    assert aligned == Window(10 * h, 19 * h, 3) and aligned.step_ms == 3 * h and aligned.whole_hours
    assert in_hours(Window(0, 10 * h, 11)) is None  # 55-minute samples stay as asked
    # flooring the start would make it MAX_SAMPLES + 1 samples of an hour: two-hour samples instead
    assert in_hours(Window(h // 2, h // 2 + MAX_SAMPLES * h, MAX_SAMPLES)) == Window(0, 1002 * h, 501)


def test_summary_and_step() -> None:
    assert summary([(0, 1.0), (1, 3.0)]) == {"min": 1.0, "max": 3.0, "avg": 2.0, "sum": 4.0}
    assert summary([]) == {"min": None, "max": None, "avg": None, "sum": None}
    assert Window(0, 10, 3).step_ms == 4 and Window(0, 10, 3).bucket(9) == 2
