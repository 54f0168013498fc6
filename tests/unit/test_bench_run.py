"""Measuring parts of ``make bench`` again into an earlier run's results (``bench.run --only``)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from bench import report
from bench.report import scaling
from bench.report.plots import SCALE_PLOT, plot_scale
from bench.run import STEPS, earlier


def test_only_takes_an_earlier_run_of_the_same_preset(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    with pytest.raises(SystemExit, match=r"results.json does not exist"):
        earlier(path, "full", ["throughput"])
    path.write_text(json.dumps({"preset": "quick", "finished": "2026-11-27 04:37 UTC"}))
    with pytest.raises(SystemExit, match=r"holds a run of preset 'quick', not 'full': run it in full"):
        earlier(path, "full", ["throughput"])
    with pytest.raises(SystemExit, match=r"no part named speed; the parts are throughput, latency, failover"):
        earlier(path, "quick", ["speed"])
    assert earlier(path, "quick", list(STEPS))["finished"] == "2026-11-27 04:37 UTC"


def test_a_part_measured_again_says_when() -> None:
    results = json.loads((Path(report.__file__).parents[1] / "results.json").read_text())  # the report's own run
    for part in STEPS:
        results.get(part, {}).pop("again", None)  # measured with the rest (a part newer than the run: none)
    results["scale"]["idle"].pop("command", None)
    assert "Measured again" not in report.render(results)
    results["failover"] |= {"finished": "2999-01-01 09:10 UTC", "again": True}
    rendered = report.render(results).splitlines()
    heading = next(i for i, line in enumerate(rendered) if line.startswith("## Failover"))
    assert rendered[heading + 2] == (
        "Measured again 2999-01-01 09:10 UTC, apart from the run above (`bench.run --only failover`)."
    )
    assert sum("Measured again" in line for line in rendered) == 1


def test_the_scale_section_gives_first_records_idle_cpu_and_a_plot_of_both_tools(tmp_path: Path) -> None:
    def run(per_s: int, first_s: float) -> dict[str, object]:
        return {"copy_records_per_s": per_s, "first_record_after_s": first_s, "new_topic_seconds": 1.5, "records": 1}

    sc = {
        "command": "python -m bench.scale",
        "partitions": [
            {"partitions": p, "records": 10, "mirrormaker2": run(100, 1.0), "ours": run(150, 1.0), "ours_vs_mm2": 1.5}
            for p in (8, 512)
        ],
        "topics": [
            {"topics": t, "mirrormaker2": run(1000, 15.5), "ours": run(2000, 9.0), "ours_vs_mm2": 2.0}
            for t in (1000, 2000)
        ],
        "idle": {
            "topics": 2000,
            "mirrormaker2": {"cpu_seconds_per_minute": 3.2, "remote_topics_after_s": 20.0, "window_s": 180.0},
            "ours": {"cpu_seconds_per_minute": 2.9, "remote_topics_after_s": 9.0, "window_s": 180.0},
        },
    }
    lines = scaling.scale(sc)
    assert "| 2000 | 1 | 1,000 | 2,000 | 2.0 | 15.5 s | 9.0 s | 1.5 s | 1.5 s |" in lines
    assert "| CPU seconds per minute | 3.2 | 2.9 |" in lines
    assert not any("Measured again" in line for line in lines)
    sc["idle"] |= {"command": "python -m bench.scale --idle-topics 2000", "finished": "2999-01-01 09:10 UTC"}
    assert any(
        line.startswith("Idle: Measured again 2999-01-01 09:10 UTC (`python -m bench.scale --idle-topics 2000`)")
        for line in scaling.scale(sc)
    )
    assert f"![records/s against topics and partitions, both tools]({SCALE_PLOT})" in lines
    plot_scale(sc, tmp_path / SCALE_PLOT)
    assert (tmp_path / SCALE_PLOT).stat().st_size > 10_000


def test_the_idle_cpu_counts_each_process_from_its_first_reading_and_never_goes_negative() -> None:
    from bench.scale import cpu_used

    before = {1: 10.0, 2: 5.0, 3: 7.0}  # 3 ends before the second reading
    after = {1: 12.5, 2: 5.0, 4: 0.5}  # 4 started in between
    assert cpu_used(before, after) == 3.0


def test_the_idle_cpu_counts_the_processes_that_left_the_group_as_pysparks_workers_do() -> None:
    """PySpark's worker daemon puts itself and the copiers it forks in a process group of their own:
    a count of the launched process's group alone left them out."""
    from bench.replicators import group
    from bench.scale import tree_cpu_seconds

    # 0.3 s of CPU, not of the clock: on a busy machine a spin by the clock gets less than 0.25 s
    worker = "import os, time\nos.setpgid(0, 0)\nwhile time.process_time() < 0.3: pass\ntime.sleep(60)"
    launcher = f"import subprocess, sys, time\nsubprocess.Popen([sys.executable, '-c', {worker!r}])\ntime.sleep(60)"
    root = subprocess.Popen([sys.executable, "-c", launcher], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while not (children := psutil.Process(root.pid).children()) or sum(children[0].cpu_times()[:2]) < 0.25:
            assert time.monotonic() < deadline, "the worker did not start"
            time.sleep(0.05)
        counted = tree_cpu_seconds(root.pid)
        assert children[0].pid not in {p.pid for p in group(root.pid)}  # out of the group ...
        assert counted[children[0].pid] >= 0.25  # ... and counted
    finally:
        for process in psutil.Process(root.pid).children(recursive=True):
            process.kill()
        root.kill()
        root.wait()


def test_a_copy_seen_whole_between_two_polls_is_shown_as_a_lower_bound_and_bounds_the_ratio() -> None:
    def run(per_s: int, *, within: bool) -> dict[str, object]:
        return {"copy_records_per_s": per_s, "copy_seconds": 10.5, "within_one_poll": within, "records": 1}

    sc = {
        "command": "python -m bench.scale",
        "partitions": [
            {
                "partitions": 2048,
                "records": 200_000,
                "mirrormaker2": run(19_048, within=True),
                "ours": run(100_000, within=False),
                "ours_vs_mm2": 5.25,
            }
        ],
        "topics": [],
    }
    lines = scaling.scale(sc)
    assert "| 2048 | 200,000 | ≥ 19,048 | 100,000 | ≤ 5.25 |" in lines
    assert any(line.startswith("≥: every record arrived between two polls of the target") for line in lines)


def test_each_topic_count_is_told_by_the_median_of_its_runs_not_by_one_slow_run() -> None:
    from bench.scale import median_run

    def run(per_s: int, first_s: float, new_s: float | None, copy_s: float) -> dict[str, object]:
        return {
            "copy_records_per_s": per_s,
            "copy_seconds": copy_s,
            "first_record_after_s": first_s,
            "new_topic_seconds": new_s,
            "new_topic_after_write_seconds": None if new_s is None else new_s - 0.04,
            "records": 10_000,
        }

    runs = [run(3_214, 6.8, 3.6, 3.11), run(98_000, 6.4, 0.8, 0.1), run(48_000, 7.1, 1.3, 0.21)]
    figures = median_run(runs)
    assert figures["copy_records_per_s"] == 48_000 and figures["copy_seconds"] == 0.21  # one run's, together
    assert figures["first_record_after_s"] == 6.8 and figures["new_topic_seconds"] == 1.3
    assert figures["runs"] == runs
    runs[2]["new_topic_seconds"] = None  # a run whose new topic never came: the others' median
    assert median_run(runs)["new_topic_seconds"] == 2.2
    assert median_run(runs[:1]) == runs[0]  # one run: as it was

    sc = {
        "command": "python -m bench.scale --repeat 3",
        "partitions": [],
        "topics": [{"topics": 100, "mirrormaker2": median_run(runs), "ours": median_run(runs), "ours_vs_mm2": 1.0}],
    }
    said = [line for line in scaling.scale(sc) if line.startswith("Each figure is the median of 3 runs of each tool")]
    assert len(said) == 1
    sc["partitions"] = [
        {
            "partitions": 512,
            "records": 10,
            "mirrormaker2": median_run(runs),
            "ours": median_run(runs),
            "ours_vs_mm2": 1.0,
        }
    ]
    said = [line for line in scaling.scale(sc) if line.startswith("Each figure is the median of 3 runs of each tool")]
    assert len(said) == 2  # under the partitions' table and under the topics'


def test_the_tools_take_turns_to_go_first_and_a_partition_counts_figures_gain_no_topic_fields() -> None:
    from bench.scale import rounds

    order: list[str] = []

    def run(tool: str) -> dict[str, object]:
        order.append(tool)
        return {"copy_records_per_s": 100 * len(order), "copy_seconds": 1.0, "records": 100}

    figures = rounds(3, "512 partition(s)", run)
    assert order == ["mirrormaker2", "ours", "ours", "mirrormaker2", "mirrormaker2", "ours"]
    assert figures["mirrormaker2"]["copy_records_per_s"] == 400  # of 100, 400, 500
    assert figures["ours"]["copy_records_per_s"] == 300  # of 200, 300, 600
    assert "new_topic_seconds" not in figures["ours"] and len(figures["ours"]["runs"]) == 3


def test_idle_cpu_is_the_median_run_by_cpu_a_minute_and_the_report_names_every_run() -> None:
    from bench.report import scaling
    from bench.scale import rounds

    cpu = iter([2.5, 2.1, 1.9, 2.6, 2.4, 2.2])  # mm2, ours, ours, mm2, mm2, ours

    def hold(tool: str) -> dict[str, object]:
        return {"tool": tool, "cpu_seconds_per_minute": next(cpu), "window_s": 180.0, "remote_topics_after_s": 11.0}

    idle = {"topics": 2000, **rounds(3, "2000 idle topic(s)", hold, "cpu_seconds_per_minute")}
    assert idle["mirrormaker2"]["cpu_seconds_per_minute"] == 2.5  # of 2.5, 2.6, 2.4
    assert idle["ours"]["cpu_seconds_per_minute"] == 2.1  # of 2.1, 1.9, 2.2
    sc = {"command": "python -m bench.scale --repeat 3", "partitions": [], "topics": [], "idle": idle}
    text = "\n".join(scaling.scale(sc))
    assert (
        "the median of 3 runs of each tool, taking turns to go first "
        "(MirrorMaker 2 2.5 / 2.6 / 2.4; ours 2.1 / 1.9 / 2.2)" in text
    )
    assert "| CPU seconds per minute | 2.5 | 2.1 |" in text


def test_a_scale_ratio_is_a_bound_when_one_copy_passed_within_one_poll() -> None:
    timed = {"copy_seconds": 1.2, "within_one_poll": False}
    bounded = {"copy_seconds": 0.4, "within_one_poll": True}

    assert scaling.scale_ratio({"mirrormaker2": timed, "ours": timed, "ours_vs_mm2": 3.1}) == "3.1"
    # ours' rate is at least its figure, so the ratio is at least ours / MM2's
    assert scaling.scale_ratio({"mirrormaker2": timed, "ours": bounded, "ours_vs_mm2": 6.08}) == "≥ 6.08"
    assert scaling.scale_ratio({"mirrormaker2": bounded, "ours": timed, "ours_vs_mm2": 3.1}) == "≤ 3.1"
    assert scaling.scale_ratio({"mirrormaker2": bounded, "ours": bounded, "ours_vs_mm2": 1.0}) is None


def test_a_cluster_row_is_its_median_run_with_every_run_told() -> None:
    from bench.cluster import median_job

    def job(per_s: int, first_s: float) -> dict[str, Any]:
        return {
            "partitions": 64,
            "workers": 2,
            "job_records_per_s": per_s,
            "first_record_after_s": first_s,
            "copy_records_per_s": per_s * 2,
            "job_mb_per_s": 1.0,
            "job_seconds": 10.0,
            "vs_local": 1.0,
            "records": 4_000_000,
            "record_size": 1024,
            "tasks_max": 4,
        }

    runs = [job(103_477, 16.9), job(121_000, 9.1), job(113_648, 11.0)]
    row = median_job(runs)
    # the median run's figures belong together: its first record, not another run's
    assert (row["job_records_per_s"], row["first_record_after_s"]) == (113_648, 11.0)
    assert row["runs"] == runs
    text = "\n".join(scaling.cluster({"command": "python -m bench.cluster --repeat 3", "rows": [row]}))
    assert "median job rate of 3" in text
    assert "64 partitions, 2 worker(s): 103,477 / 121,000 / 113,648" in text
    assert median_job(runs[:1]) is runs[0]
