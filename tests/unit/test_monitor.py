"""The monitoring service's pieces that need no cluster: the exposition of a snapshot (MirrorMaker 2's
names and labels, this project's own), what a late observation shows, the configuration read again
only when its file changes, and what error texts may show."""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from srm.config import load_config
from srm.operations.health import FlowHealth
from srm.service.exposition import render
from srm.service.monitor import ConfigSource, Monitor
from srm.service.snapshot import ClusterState, Copied, FlowView, PartitionFigures, Snapshot, redact
from tests.helpers import offline_config

NOW_MS = int(time.time() * 1000)


def view(tmp_path: Path) -> FlowView:
    flow = load_config(offline_config(tmp_path)).enabled_flows()[0]
    finished = datetime.fromtimestamp(NOW_MS / 1000, UTC)
    lease = {
        "topic": "orders",
        "partition": 1,
        "target_topic": "west.orders",
        "records": 300,
        "bytes": 30_000,
        "transactions": 3,
        **{f"{m}_{k}_ms": v for m in ("record_age", "latency") for k, v in (("min", 1.0), ("avg", 2.0), ("max", 4.0))},
        "started_at": finished - timedelta(seconds=30),
        "finished_at": finished,
    }
    return FlowView(
        flow,
        FlowHealth(flow.name, flow.source, flow.target, state="running", heartbeat_age_s=3.0),
        partitions=(
            PartitionFigures("orders", 0, 100, 100, 0, None),
            PartitionFigures("orders", 1, 500, 200, 300, NOW_MS - 90_000),
        ),
        leases=(lease,),
        checkpoints=(
            {
                "group": "g",
                "topic": "west.orders",
                "partition": 1,
                "latency_ms": 5.0,
                "min": 4.0,
                "max": 6.0,
                "avg": 5.0,
            },
        ),
        lost=(("orders", 1, 7),),
        copied=(Copied("orders", 1, "west.orders", 300, 30_000, 3, 1),),
        observed_ms=NOW_MS,
    )


def samples(text: bytes) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return out


def test_the_exposition_has_mm2_names_and_labels_and_the_projects_own(tmp_path: Path) -> None:
    found = samples(render(Snapshot(taken_ms=NOW_MS, flows={"west->east": view(tmp_path)})))
    mm2 = {"source": "west", "target": "east", "topic": "west.orders", "partition": "1"}
    assert found["kafka_connect_mirror_mirrorsourceconnector_record_count"] == [(mm2, 300)]
    assert found["kafka_connect_mirror_mirrorsourceconnector_record_rate"] == [(mm2, 10.0)]  # 300 in 30 s
    assert found["kafka_connect_mirror_mirrorsourceconnector_byte_rate"] == [(mm2, 1000.0)]
    assert found["kafka_connect_mirror_mirrorsourceconnector_replication_latency_ms_max"] == [(mm2, 4.0)]
    assert found["kafka_connect_mirror_mirrorsourceconnector_record_age_ms"] == [(mm2, 2.0)]
    checkpoint = {"source": "west", "target": "east", "group": "g", "topic": "west.orders", "partition": "1"}
    assert found["kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms_max"] == [(checkpoint, 6.0)]
    ours = {"flow": "west->east", "source": "west", "target": "east", "topic": "orders"}
    assert found["srm_replication_records_lag"] == [({**ours, "partition": "0"}, 0), ({**ours, "partition": "1"}, 300)]
    ages = dict((s[0]["partition"], s[1]) for s in found["srm_replication_oldest_record_age_seconds"])
    assert ages["0"] == 0 and ages["1"] >= 90, ages  # 90 s old when rendered, more since
    assert found["srm_data_loss_records_total"] == [({**ours, "partition": "0"}, 0), ({**ours, "partition": "1"}, 7)]
    assert found["srm_replication_transactions_total"] == [({**ours, "partition": "1"}, 3)]
    assert found["srm_replication_transactions_aborted_total"] == [({**ours, "partition": "1"}, 1)]
    states = {s[0]["state"]: s[1] for s in found["srm_flow_state"]}
    assert states["running"] == 1 and sum(states.values()) == 1, states
    assert found["srm_heartbeat_age_seconds"][0][1] == 3.0
    assert found["srm_config_usable"] == [({}, 1.0)]


def test_a_late_observation_keeps_its_figures_and_shows_an_unreachable_cluster(tmp_path: Path) -> None:
    before = view(tmp_path)
    monitor = Monitor(ConfigSource(tmp_path / "srm.yaml"))
    down = {"east": ClusterState("east", False, NOW_MS - 60_000, NOW_MS, "no metadata within 5 s")}
    late = monitor._late(before.flow, before, down, paused=False)
    assert late.health.state == "unreachable" and late.health.reason.startswith("east unreachable since "), late
    assert late.partitions == before.partitions and "last complete observation" in late.note
    up = {"east": ClusterState("east", True, NOW_MS - 60_000, NOW_MS)}
    assert monitor._late(before.flow, before, up, paused=False).health.state == "running"
    first = monitor._late(before.flow, None, down, paused=True)
    assert first.health.state == "paused"


def test_the_configuration_is_read_again_only_when_its_file_changes(tmp_path: Path) -> None:
    path = offline_config(tmp_path)
    source = ConfigSource(path)
    first, issues = source.current()
    assert first is not None and not issues
    assert source.current()[0] is first  # unchanged file: the same parsed config
    path.write_text(path.read_text().replace("target: east", "target: east\n  tasks.max: 0"))
    os.utime(path, ns=(1, 1))
    changed, issues = source.current()
    assert changed is not first and [i.flow for i in issues] == ["west->east"], issues


def test_error_texts_show_no_bootstrap_servers_and_no_configuration_path(tmp_path: Path) -> None:
    config = load_config(offline_config(tmp_path))
    text = f"cluster west (127.0.0.1:1) did not answer; see {config.file}"
    shown = redact(text, config.clusters, config.file)
    assert shown == "cluster west did not answer; see srm.yaml", shown
    assert redact("broker 127.0.0.1:2 refused", config.clusters) == "broker <broker> refused"


def test_the_monitor_looks_as_often_as_the_configuration_says_and_a_bad_value_is_refused(tmp_path: Path) -> None:
    from srm.config.loader import load_config_with_issues

    path = offline_config(tmp_path)
    path.write_text(path.read_text() + "monitoring:\n  refresh.seconds: 2\n")
    monitor = Monitor(ConfigSource(path))
    monitor.probe_timeout_s = 0.5  # nothing listens
    try:
        assert monitor.refresh_s == 10.0  # before the configuration is read
        monitor.refresh()
        assert monitor.refresh_s == 2.0
    finally:
        monitor.stop()
    path.write_text(path.read_text().replace("refresh.seconds: 2", "refresh.seconds: 0"))
    _, issues = load_config_with_issues(path)
    assert [str(i).split(": ", 1)[1] for i in issues] == [
        "monitoring.refresh.seconds: Input should be greater than or equal to 1 (got 0)"
    ], issues
