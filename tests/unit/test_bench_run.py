"""Measuring parts of ``make bench`` again into an earlier run's results (``bench.run --only``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench import report
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
    results = json.loads((Path(report.__file__).parent / "results.json").read_text())  # the report's own run
    for part in STEPS:
        results[part].pop("again", None)  # measured with the rest
    assert "Measured again" not in report.render(results)
    results["failover"] |= {"finished": "2999-01-01 09:10 UTC", "again": True}
    rendered = report.render(results).splitlines()
    heading = next(i for i, line in enumerate(rendered) if line.startswith("## Failover"))
    assert rendered[heading + 2] == (
        "Measured again 2999-01-01 09:10 UTC, apart from the run above (`bench.run --only failover`)."
    )
    assert sum("Measured again" in line for line in rendered) == 1
