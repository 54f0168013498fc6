"""DagBag integrity: the DAG folder parses with no cluster and no connection, into the DAGs specified."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from srm.paths import project_root
from tests.conftest import free_ports
from tests.dags.conftest import probe

FLOWS = """\
defaults:
  replication.factor: 1
clusters:
  alpha: {{bootstrap.servers: "127.0.0.1:{p0}"}}
  beta: {{bootstrap.servers: "127.0.0.1:{p1}"}}
  gamma: {{bootstrap.servers: "127.0.0.1:{p2}"}}
flows:
  - source: alpha
    target: beta
    sync.group.offsets.enabled: true
    emit.checkpoints.interval.seconds: 30
    refresh.topics.interval.seconds: 300
  - source: beta
    target: alpha
    mode: scheduled
    schedule: "@hourly"
  - source: alpha
    target: gamma
    enabled: false
  - source: gamma
    target: beta
    emit.checkpoints.enabled: false
"""
JOBS = ("replicate", "checkpoints", "maintenance", "heartbeats")
# emit.checkpoints.enabled: false leaves the checkpoints DAG out
UNCHECKPOINTED = {f"gamma_to_beta.{job}" for job in JOBS if job != "checkpoints"}


@pytest.fixture(scope="module")
def parsed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The DAG folder parsed with clusters on ports where nothing listens and no Airflow connection."""
    tmp = tmp_path_factory.mktemp("dagbag")
    config = tmp / "srm.yaml"
    config.write_text(FLOWS.format(**{f"p{i}": port for i, port in enumerate(free_ports(3))}))
    return probe(tmp / "airflow", config, connections=False)


def test_parses_without_clusters_connections_or_heavy_imports(parsed: dict[str, Any]) -> None:
    assert parsed["import_errors"] == {}
    assert parsed["heavy_imports"] == []
    expected = {f"{flow}.{job}" for flow in ("alpha_to_beta", "beta_to_alpha") for job in JOBS} | {"srm.failover"}
    assert set(parsed["dags"]) == expected | UNCHECKPOINTED  # the disabled flow alpha->gamma has none


def test_every_dag_has_retries_timeouts_tags_and_docs(parsed: dict[str, Any]) -> None:
    for dag_id, dag in parsed["dags"].items():
        assert "srm" in dag["tags"], dag_id
        assert dag_id.split(".")[0].replace("_to_", "->") in dag["doc_md"] or dag_id == "srm.failover"
        assert len(dag["doc_md"]) > 200, dag_id
        assert dag["max_active_runs"] == 1 and dag["catchup"] is False, dag_id
        continuous = dag["schedule"] == "@continuous"
        assert continuous or dag["dagrun_timeout_s"], dag_id
        for task_id, task in dag["tasks"].items():
            if task["type"] == "ReplicationAliveSensor":
                assert task["retries"] == 0  # a stall alarm is never retried away
                continue
            assert task["retries"] >= 1 and task["retry_delay_s"] >= 30, (dag_id, task_id)
            assert task["retry_exponential_backoff"], (dag_id, task_id)
            assert continuous or task["execution_timeout_s"], (dag_id, task_id)


def test_replicate_dags(parsed: dict[str, Any]) -> None:
    continuous = parsed["dags"]["alpha_to_beta.replicate"]
    assert continuous["schedule"] == "@continuous"
    task = continuous["tasks"]["replicate"]
    assert task["type"] == "FlowSparkSubmitOperator" and task["conn_id"] == "spark_default"
    assert task["application"] == str(project_root() / "srm" / "jobs" / "replicate.py")
    assert task["application_args"][:4] == ["--source", "alpha", "--target", "beta"]
    assert task["application_args"][-2:] == ["--mode", "{{ params.mode }}"]
    # The driver's options follow the mode a run is started with (FlowSparkSubmitOperator.execute;
    # the DAG runs in test_dag_runs.py and test_dag_ownership.py check both), never fixed at parse time.
    assert not task["conf"]
    assert continuous["params"]["mode"] == {"enum": ["continuous", "available-now"], "default": "continuous"}

    scheduled = parsed["dags"]["beta_to_alpha.replicate"]
    assert scheduled["schedule"] == "@hourly"
    assert scheduled["params"]["mode"]["default"] == "available-now"
    assert scheduled["tasks"]["replicate"]["execution_timeout_s"]


def test_checkpoints_dags(parsed: dict[str, Any]) -> None:
    synced = parsed["dags"]["alpha_to_beta.checkpoints"]
    assert synced["schedule"] == "0:00:30"  # emit.checkpoints.interval.seconds
    assert synced["upstream"] == {"checkpoints": [], "sync_group_offsets": ["checkpoints"]}
    task = synced["tasks"]["checkpoints"]
    assert task["type"] == "FlowSparkSubmitOperator"
    assert task["application"] == str(project_root() / "srm" / "jobs" / "checkpoints.py")
    assert "--no-sync" in task["application_args"]

    unsynced = parsed["dags"]["beta_to_alpha.checkpoints"]
    assert unsynced["schedule"] == "0:01:00"  # MM2's default, 60 s
    assert unsynced["upstream"] == {"checkpoints": []}  # sync.group.offsets.enabled defaults to false


def test_maintenance_dag_runs_its_kafka_steps_in_order_and_the_rollup_and_history_prune_beside_them(
    parsed: dict[str, Any],
) -> None:
    dag = parsed["dags"]["alpha_to_beta.maintenance"]
    assert dag["schedule"] == "0:05:00"  # refresh.topics.interval.seconds
    steps = ["validate_internal_topics", "remote_topics", "sync_topic_configs", "sync_topic_acls", "srm_meta"]
    chained = {step: steps[i - 1 : i] for i, step in enumerate(steps)}
    # a wrong remote topic does not hold them up
    assert dag["upstream"] == {**chained, "metrics_rollup": [], "prune_sync_history": []}


def test_heartbeats_dag(parsed: dict[str, Any]) -> None:
    dag = parsed["dags"]["alpha_to_beta.heartbeats"]
    assert dag["schedule"] == "0:01:00"
    assert {t: v["type"] for t, v in dag["tasks"].items()} == {
        "emit": "PythonOperator",
        "replication_alive": "ReplicationAliveSensor",
    }
    assert set(dag["params"]) == {"duration_seconds", "stall_threshold_seconds", "wait_seconds"}


def test_failover_dag(parsed: dict[str, Any]) -> None:
    dag = parsed["dags"]["srm.failover"]
    assert dag["schedule"] == "None"  # manual trigger only
    params = dag["params"]
    assert set(params) == {"source", "target", "groups", "mode", "dry_run"}
    assert params["mode"]["enum"] == ["planned", "unplanned"]
    assert params["dry_run"]["default"] is True
    assert params["source"]["default"] == "alpha" and params["target"]["default"] == "beta"


def test_broken_flow_is_logged_and_hides_nothing(tmp_path: Path) -> None:
    config = tmp_path / "srm.yaml"
    broken = FLOWS.replace("    mode: scheduled\n", "    mode: scheduled\n    topics: ['orders[']\n")
    config.write_text(broken.format(p0=1, p1=2, p2=3))
    parsed = probe(tmp_path / "airflow", config)
    assert parsed["import_errors"] == {}
    assert {d for d in parsed["dags"] if d != "srm.failover"} == {
        f"alpha_to_beta.{job}" for job in JOBS
    } | UNCHECKPOINTED
    assert "flow beta->alpha left out" in parsed["log"]
    assert f"{config}:16" in parsed["log"]  # file and line of the broken regex
    assert "topics" in parsed["log"]


def test_broken_flow_is_an_error_in_strict_mode(tmp_path: Path) -> None:
    config = tmp_path / "srm.yaml"
    config.write_text(FLOWS.replace("    mode: scheduled\n", "    mode: scheduled\n    topics: ['orders[']\n"))
    code = f"from srm.airflow.factory import build_dags; build_dags({str(config)!r}, strict=True)"
    result = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    assert f"{config}:16" in result.stderr and "orders[" in result.stderr


def test_a_broken_file_is_an_import_error_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "srm.yaml"
    config.write_text(FLOWS.format(p0=1, p1=2, p2=3).replace('gamma: {bootstrap.servers: "127.0.0.1:3"}', "gamma: {}"))
    parsed = probe(tmp_path / "airflow", config)
    assert parsed["dags"] == {}  # a problem of a cluster concerns every flow: nothing is generated
    (error,) = parsed["import_errors"].values()
    assert f"{config}:6" in error and "gamma" in error and "bootstrap.servers" in error
