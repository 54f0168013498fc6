"""The report's section of ``bench.eos_floor --out``: each round's figures and issue 45's two bounds
judged round by round, from the JSON the benchmark writes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import eos_floor
from bench.report.floor import floor


def run(p50: float, p99: float) -> dict[str, float]:
    return {"p50_ms": p50, "p99_ms": p99, "p95_ms": p99, "max_ms": p99 * 2, "records": 100, "sent": 100}


def measured(rate: int, ours: list[float], textbook: list[float], alo: list[float], mm2: list[float]) -> dict:
    runs = {
        "ours_exactly_once": [run(8, p) for p in ours],
        "textbook_exactly_once": [run(7, p) for p in textbook],
        "ours_at_least_once": [run(6, p) for p in alo],
        "mirrormaker2": [run(7, p) for p in mm2],
    }
    return {
        "rate": rate,
        "seconds": 120,
        "warmup_seconds": 5,
        "partitions": 8,
        "record_size": 100,
        "rounds": len(ours),
        "runs": runs,
        "p99_ratios": eos_floor.ratios(runs),
        "brokers_up_s": [{"us-west": 200.0, "us-east": 95.0}, {"us-west": 900.0, "us-east": 800.0}],
    }


def test_each_round_is_judged_against_the_tool_of_the_same_guarantee(tmp_path: Path) -> None:
    result = {
        "command": ".venv/bin/python -m bench.eos_floor --rates 5000,50000 --seconds 120 --rounds 2 --out bench",
        "finished": "2026-12-01 01:00 UTC",
        "minutes": 55.0,
        "rates": [
            measured(5000, ours=[30.0, 15.0], textbook=[12.0, 13.0], alo=[11.0, 12.0], mm2=[14.0, 14.0]),
            measured(50000, ours=[16.0, 16.0], textbook=[13.0, 13.0], alo=[13.0, 11.0], mm2=[12.0, 12.0]),
        ],
    }
    (tmp_path / eos_floor.FILE).write_text(json.dumps(result))
    text = floor(tmp_path)
    assert result["command"] in text
    five, fifty = text.split("### 5,000 records/s")[1].split("### 50,000 records/s")
    # round 1 at 5,000: 30 / 12 = 2.5 past 1.25, shown in bold; the youngest broker up 95 s = 1.6 min
    assert "| 1 | 1.6 | 8 / 30.0 | 7 / 12.0 | 6 / 11.0 | 7 / 14.0 | **2.5** | 0.79 |" in five
    assert "| 2 | 13.3 | 8 / 15.0 | 7 / 13.0 | 6 / 12.0 | 7 / 14.0 | 1.15 | 0.86 |" in five
    assert "the textbook exactly-once copier, p99 at most 1.25x: **missed** in round(s) 1." in five
    assert "MirrorMaker 2, p99 at most 1.0x: met in every round." in five
    # at 50,000: 16 / 13 = 1.23 is within 1.25; at least once 13 / 12 is past MM2's in round 1
    assert "copier, p99 at most 1.25x: met in every round." in fifty
    assert "MirrorMaker 2, p99 at most 1.0x: **missed** in round(s) 1." in fifty
    # the spread of each tool against itself: at 5,000 ours 30 / 15, the textbook copier 13 / 12
    spread = "ours, exactly once 2.00; textbook copier (Python) 1.08; ours, at least once 1.09; MirrorMaker 2 1.00."
    assert spread in five
    assert "ours, exactly once 1.00; textbook copier (Python) 1.00; ours, at least once 1.18" in fifty


def test_no_section_without_a_run(tmp_path: Path) -> None:
    assert floor(tmp_path) == ""


def test_a_round_run_cold_shows_the_brokers_age_as_each_tool_began(tmp_path: Path) -> None:
    cold = measured(5000, ours=[14.0, 13.0], textbook=[12.0, 12.0], alo=[8.0, 9.0], mm2=[14.0, 14.0])
    for index, tool_runs in enumerate(cold["runs"].values()):  # restarted 6-24 s before each run
        tool_runs[0] |= {"brokers_up_s": 6.0 + 6 * index, "brokers_started": 1000.0 + 200 * index}
    cold["cold_rounds"] = [1]
    result = {"command": "c", "finished": "f", "minutes": 1.0, "rates": [cold]}
    (tmp_path / eos_floor.FILE).write_text(json.dumps(result))
    text = floor(tmp_path)
    assert "| 1 | 0.1-0.4, restarted before each tool | 8 / 14.0 | 7 / 12.0 |" in text
    assert "| 2 | 13.3 | 8 / 13.0 |" in text  # a warm round: the youngest broker's age as it began


def test_cold_is_refused_on_clusters_it_cannot_restart(tmp_path: Path) -> None:
    config = tmp_path / "srm.yaml"
    config.write_text(
        "clusters:\n  west: {bootstrap.servers: '127.0.0.1:1'}\n  east: {bootstrap.servers: '127.0.0.1:2'}\n"
        "flows:\n  - {source: west, target: east, topics: ['.*']}\n"
    )
    with pytest.raises(SystemExit, match=f"--cold restarts local brokers: {config} names clusters that are not local"):
        eos_floor.restart_brokers(config)
