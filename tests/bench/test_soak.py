"""``python -m bench.soak`` end to end, short: a continuous flow under five kinds of fault copies every
record once and in order, the flow goes on after each fault, its sync history follows the source's
retention, and every group fails over without re-reading or skipping a record."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bench.local import ROOT

KINDS = "kill_worker,add_partitions,restart_target,kill_driver,add_topic"


@pytest.mark.integration
@pytest.mark.bench
@pytest.mark.timeout(1200)
def test_a_four_minute_soak_loses_and_duplicates_nothing_and_prunes_the_history(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bench.soak", "--minutes", "4", "--rate", "500", "--topics", "2"]
    command += ["--partitions", "4", "--groups", "10", "--retention-minutes", "1.5", "--faults", "5"]
    command += ["--kinds", KINDS, "--warmup-seconds", "30", "--prune-seconds", "45", "--checkpoint-seconds", "40"]
    # The clusters' logs and data stay in the test's temporary folder when it fails, to be read.
    command += ["--json", "--out", str(tmp_path), "--workdir", str(tmp_path / "work")]
    run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1100, check=False)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-5000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["records"] > 0.9 * result["sent"] > 0
    assert (result["lost"], result["duplicated"]) == (0, 0), result
    assert sorted(f["kind"] for f in result["faults"]) == sorted(KINDS.split(","))
    for fault in result["faults"]:
        assert not fault["detail"].startswith("failed"), fault
        assert fault["recovered_s"] is not None and fault["recovered_s"] < 60, fault
    assert result["history_pruned"] is True
    failover = result["failover"]
    assert "error" not in failover, failover
    assert (failover["groups"], failover["missing"], failover["re_read"], failover["skipped"]) == (10, 0, 0, 0)
    assert failover["partitions"] == 10 * (4 + 2 + 2)  # the partitions added and the topic added too
    assert result["samples"] and all(s["job_rss_mb"] > 0 for s in result["samples"])
    report = (tmp_path / "SOAK.md").read_text()
    assert "| 0 lost, 0 duplicated, order kept | 0 lost, 0 duplicated | yes |" in report
    assert json.loads((tmp_path / "soak.json").read_text())["records"] == result["records"]
    assert (tmp_path / "soak.png").stat().st_size > 0
    shutil.rmtree(tmp_path / "work")
