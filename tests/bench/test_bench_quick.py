"""``make bench-quick`` runs end to end and writes its report (benchmarks are measured, never
asserted on: this checks only that every part ran and produced figures)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.bench.local import ROOT, local_clusters_running

SECTIONS = (
    "## Throughput",
    "## Latency",
    "## Failover accuracy",
    "## Scale",
    "## Aggregation",
    "## Checkpoints at scale",
    "## Profile of the copy tasks",
    "## Spark cluster",
    "## REST metric endpoints",
    "## Monitoring service",
)


@pytest.mark.integration
@pytest.mark.bench
@pytest.mark.timeout(1800)
def test_make_bench_quick_writes_the_report(tmp_path: Path) -> None:
    were_running = local_clusters_running()
    try:
        run = subprocess.run(
            ["make", "bench-quick", f"BENCH_QUICK_OUT={tmp_path}"],
            cwd=ROOT,
            env={k: v for k, v in os.environ.items() if not k.startswith("MAKE")},
            capture_output=True,
            text=True,
            timeout=1700,
            check=False,
        )
        again = None
        if run.returncode == 0:  # one part measured again into the same results (bench.run --only)
            before = json.loads((tmp_path / "results.json").read_text())
            only = ["--preset", "quick", "--out", str(tmp_path), "--only", "profile"]
            again = subprocess.run(
                [str(ROOT / ".venv/bin/python"), "-m", "bench.run", *only],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
    finally:
        if not were_running:
            subprocess.run(["make", "kafka-down"], cwd=ROOT, capture_output=True, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    report = (tmp_path / "REPORT.md").read_text()
    for section in SECTIONS:
        assert section in report
    assert (tmp_path / "throughput_latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((tmp_path / "results.json").read_text())
    for summary in results["throughput"]["summary"].values():
        for tool in ("mm2", "eos_on", "eos_off"):
            assert summary[tool]["copy_records_per_s"]["median"] > 0
    for run in results["latency"]["runs"]:
        for tool in ("ours_exactly_once", "mirrormaker2"):
            assert run[tool]["records"] == run[tool]["sent"] > 0, (run["rate"], tool)
    for row in results["latency"]["sweep"]["sweep"]:
        assert row["records"] == row["sent"] > 0 and row["commits_per_s"] > 0, row
    assert results["failover"]["ours"]["skipped"] == 0
    assert all(row["ours"]["copied_all"] and row["mirrormaker2"]["copied_all"] for row in results["scale"]["topics"])
    new_topics = [
        (row[tool]["new_topic_after_write_seconds"], row[tool]["new_topic_seconds"])
        for row in results["scale"]["topics"]
        for tool in ("ours", "mirrormaker2")
    ]
    assert all(0 < after_write <= after_create for after_write, after_create in new_topics), new_topics
    cp = results["checkpoints"]
    assert cp["groups_seen"] == 20 and cp["checkpoints_written"] == cp["group_offsets"] == 20 * 10, cp
    assert results["profile"]["top"]
    masters = [row["master"] for row in results["cluster"]["rows"]]
    assert masters[0].startswith("local") and masters[1].startswith("spark://"), masters
    assert all(row["copied"] >= row["records"] for row in results["cluster"]["rows"])  # plus the heartbeats
    assert results["rest"]["rows_in_warehouse"] == 5 * 2 * 1440
    assert all(e["requests"] == 5 and e["p95_ms"] > 0 for e in results["rest"]["endpoints"])
    mon = results["monitoring"]
    # Every partition observed (and the source's heartbeats topic, which every flow copies, if it has one).
    assert mon["partitions"] == 40 and all(40 <= r["partitions"] <= 41 for r in mon["rounds"][1:]), mon
    assert mon["scrape"]["codes"] == [200] and mon["replications_frozen"]["codes"] == [200], mon
    assert [c["cluster"] for c in mon["frozen_clusters"]], mon  # the frozen target named unreachable
    assert again is not None and again.returncode == 0, again and again.stdout[-3000:] + again.stderr[-3000:]
    assert results["finished"] == before["finished"] and results["failover"] == before["failover"]  # kept
    assert results["profile"]["again"] is True and not any(results[part].get("again") for part in ("rest", "scale"))
    profile = report[report.index("## Profile of the copy tasks") :].splitlines()
    assert profile[2].startswith("Measured again ") and "(`bench.run --only profile`)" in profile[2]
