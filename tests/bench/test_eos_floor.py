"""``python -m bench.eos_floor`` runs its five tools end to end: every one of them copies each record
of the load once, the textbook copiers (Python and Java) in transactions, and no run leaves a topic on
the clusters, neither its load topic, the copy of it nor the replicator's internal topics (the figures
are measured, never asserted on)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from bench.report.floor import floor
from srm.config import load_config
from srm.kafka import clients
from tests.bench.local import ROOT, run_on_local_clusters

# Made by the first run on fresh clusters and shared by every later one: Kafka's own, the
# control and ownership topics of every flow, the heartbeats ours and MirrorMaker 2 emit on a source.
SHARED = {"__consumer_offsets", "__transaction_state", "srm-owners.internal", "srm-control.internal", "heartbeats"}


def cluster_topics() -> set[str]:
    """Every topic on the local clusters, as ``<cluster>:<topic>``."""
    config = load_config(ROOT / "conf/srm.yaml")
    found = set()
    for cluster in config.clusters:
        topics = clients.admin_client(cluster).list_topics(timeout=30).topics
        found |= {f"{cluster.alias}:{name}" for name in topics if name not in SHARED}
    return found


@pytest.mark.integration
@pytest.mark.bench
@pytest.mark.timeout(900)
def test_the_floor_benchmark_copies_every_record_once_with_each_tool(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "bench.eos_floor", "--rounds", "1", "--rate", "500"]
    command += ["--seconds", "4", "--warmup-seconds", "1", "--partitions", "3", "--out", str(tmp_path), "--cold"]
    left: set[str] = set()

    @contextmanager
    def topics_left() -> Iterator[None]:
        before = cluster_topics()
        yield
        left.update(cluster_topics() - before)

    run = run_on_local_clusters(command, timeout_s=840, around=topics_left)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert not left, f"the benchmark left topics of its runs: {sorted(left)}"
    figures = json.loads(run.stdout)
    tools = {"ours_exactly_once", "textbook_exactly_once", "textbook_exactly_once_java", "mirrormaker2"}
    assert set(figures["runs"]) == tools | {"ours_at_least_once"}
    # ours against the tool of the same guarantee, per round
    assert {k: len(v) for k, v in figures["p99_ratios"].items()} == {
        "ours_vs_textbook": 1,
        "ours_vs_textbook_java": 1,
        "ours_at_least_once_vs_mirrormaker2": 1,
    }
    for tool, runs in figures["runs"].items():
        (only,) = runs
        # records counts the measured records read (the warm-up's left out); sent, those produced
        assert only["records"] == only["sent"] > 0, tool
        assert 0 < only["p50_ms"] <= only["p99_ms"] <= only["max_ms"], tool
        assert figures["median"][tool]["p99_ms"] == only["p99_ms"]
    # 2,500 records at 500/s, each poll's records one transaction: many, and never more than records
    for textbook in ("textbook_exactly_once", "textbook_exactly_once_java"):
        (run,) = figures["runs"][textbook]
        assert 10 < run["transactions"] <= 2_500 + 3, textbook
    # the round began with both local brokers up; --cold restarted them before each tool's run
    (up,) = figures["brokers_up_s"]
    assert set(up) == {"us-west", "us-east"} and all(seconds > 0 for seconds in up.values())
    assert figures["cold_rounds"] == [1]
    started = [runs[0]["brokers_started"] for runs in figures["runs"].values()]
    assert len(set(started)) == len(started), f"the brokers were not restarted before each run: {started}"
    # --out kept the figures for the report's section
    (kept,) = json.loads((tmp_path / "eos_floor.json").read_text())["rates"]
    assert kept["runs"] == figures["runs"]
    assert "restarted before each tool |" in floor(tmp_path)
