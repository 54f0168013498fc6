"""A flow between two SASL_SSL clusters (SCRAM-SHA-512, the password a ``${env:...}`` reference) runs
through the Airflow DAG and ``srm-control`` on the Spark standalone cluster, and its password shows up
nowhere: not in the traffic between the job's processes (pickled tasks, shipped files, py4j), not
in Spark's event logs, not on any command line, not in task, job, executor or broker logs, not in
the metrics tables, not in the output of any srm-control command (text and ``--json``), not in the
REST API's responses or the API server's log."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from srm.airflow import callables
from srm.config.model import Flow
from srm.devenv.airflow import LocalAirflow
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from tests.airflow_api import PASSWORD, USER, ApiServer
from tests.checkpointing import commit
from tests.conftest import REFERENCE, SASL_PASSWORD, SASL_PASSWORD_ENV
from tests.dags.test_dag_runs import Airflow, ok, run_dag
from tests.helpers import produce, spark_defaults, srm_control
from tests.jobs import exactly_once
from tests.replication import sequenced
from tests.secured import SecuredCluster, secured_env
from tests.sniffer import CommandLineWatch, LoopbackCapture, can_capture
from tests.spark_cluster import StandaloneCluster

pytestmark = [
    pytest.mark.integration,
    pytest.mark.alone,  # it watches every byte on loopback and every command line: no other test's
    pytest.mark.skipif(not can_capture(), reason="capturing loopback traffic needs root or CAP_NET_RAW"),
]


def commands(source: str, target: str, group: str) -> list[tuple[str, ...]]:
    """Every srm-control command that talks to the clusters or shows the config, as a user runs them."""
    flow = ("--source", source, "--target", target)
    return [
        ("validate",),
        ("validate", "--json"),
        ("status", *flow),
        ("status", *flow, "--json"),
        ("acls", *flow),
        ("acls", *flow, "--json"),
        ("topics", *flow, "--list"),
        ("groups", *flow, "--list", "--json"),
        ("translate", *flow, "--group", group),
        ("offsets", *flow, "--group", group, "--export"),
        ("failover", *flow, "--group", group, "--apply", "--json"),  # then failback has a group to move back
        ("failback", *flow, "--group", group),
    ]


def cli_output(config: Path, args: tuple[str, ...]) -> str:
    done = srm_control(config, *args)
    assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-2000:])
    return done.stdout + done.stderr


def rest_responses(airflow: LocalAirflow, tmp: Path, flow: Flow, topic: str, group: str) -> dict[str, str]:
    """The REST API's answers about the flow (and the API server's log), as text."""
    source, target = flow.source, flow.target
    server = ApiServer(airflow, tmp)
    try:
        server.wait()
        token = server.token(USER, PASSWORD)
        paths = [
            "/srm/v2/replications",
            f"/srm/v2/replications/{source}/{target}/topics",
            f"/srm/v2/cluster-metrics/{source}/{target}/record-rate",
            f"/srm/v2/topic-metrics/{source}/{target}/{topic}/replication-latency-ms",
            f"/srm/v2/translate?source={source}&target={target}&group={group}",
        ]
        answers = {path: server.get(path, token) for path in paths}
    finally:
        server.stop()
    assert {path: status for path, (status, _) in answers.items()} == dict.fromkeys(paths, 200), answers
    (replication,) = answers["/srm/v2/replications"][1]["replications"]
    assert replication["flow"] == f"{source}->{target}", replication
    return {path: json.dumps(body) for path, (_, body) in answers.items()} | {"api server": server.log.read_text()}


def warehouse_rows(root: Path) -> list[str]:
    """Every row of every Delta table under ``root``, as text."""
    from deltalake import DeltaTable

    rows = []
    for log in sorted(root.glob("**/_delta_log")):
        rows += [repr(row) for row in DeltaTable(str(log.parent)).to_pyarrow_table().to_pylist()]
    return rows


def test_a_sasl_password_travels_nowhere_in_clear(
    secured: dict[str, SecuredCluster],
    spark_cluster: StandaloneCluster,
    tmp_path: Path,
    unique: Callable[[str], str],
    *,
    airflow: Airflow,
    airflow_home: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic, group = unique("sasl-orders"), unique("sasl-reader")
    connection = unique("spark_sasl").replace("-", "_")
    monkeypatch.setenv(SASL_PASSWORD_ENV, SASL_PASSWORD)
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{connection.upper()}", json.dumps({"conn_type": "spark", "host": spark_cluster.master})
    )
    events = tmp_path / "spark-events"
    monkeypatch.setenv("SPARK_CONF_DIR", str(spark_defaults(tmp_path / "spark-conf", events)))
    flow_settings = {"topics": [topic], "tasks.max": 2, "spark.connection_id": connection}
    env = secured_env(secured, tmp_path, flow_settings)
    flow = env.flow()
    ensure_topic(clients.admin_client(env.west), topic, 4)
    produce(env.west, topic, sequenced(4, 2000))
    commit(env.west, group, {(topic, p): 100 * (p + 1) for p in range(4)})
    password = SASL_PASSWORD.encode()
    maintained = ok(run_dag(env, airflow, "maintenance"))
    assert callables.emit_heartbeats(str(env.path), flow.source, flow.target, 1) >= 1

    with (
        LoopbackCapture([password, REFERENCE.encode(), topic.encode()]) as capture,
        CommandLineWatch(password) as command_lines,
    ):
        replicated = ok(run_dag(env, airflow, "replicate", {"mode": "available-now"}))
        flow_args = ("--source", flow.source, "--target", flow.target, "--master", spark_cluster.master)
        checkpointed = srm_control(env.path, "run", "checkpoints", *flow_args)
    dropped = capture.stop()
    beating = ok(
        run_dag(env, airflow, "heartbeats", {"duration_seconds": 1, "stall_threshold_seconds": 600, "wait_seconds": 1})
    )
    assert checkpointed.returncode == 0, checkpointed.stdout[-3000:] + checkpointed.stderr[-3000:]
    assert exactly_once(env, topic, 2000, 4) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    outputs = {" ".join(args): cli_output(env.path, args) for args in commands(flow.source, flow.target, group)}
    translated = outputs[f"translate --source {flow.source} --target {flow.target} --group {group}"]
    assert len(translated.splitlines()) == 4, outputs
    outputs |= rest_responses(airflow(env.path), tmp_path, flow, topic, group)

    # The capture saw the jobs' own traffic (the topic in the tasks, the reference in the shipped
    # YAML) and lost nothing, so its zero for the password means something.
    assert dropped == 0 and capture.hits[topic.encode()] > 0 and capture.hits[REFERENCE.encode()] > 0, capture.hits
    assert capture.hits[password] == 0, f"the password crossed loopback in clear {capture.hits[password]} times"
    assert command_lines.samples > 10 and command_lines.seen == []
    # Spark 4 rolls event logs: one folder per application (eventlog_v2_<app>/events_<n>_<app>...).
    event_logs = [b"".join(f.read_bytes() for f in sorted(app.rglob("*")) if f.is_file()) for app in events.iterdir()]
    # The replicate job's application; the checkpoints pass starts none (it needs no Spark session).
    assert len(event_logs) == 1 and b"SparkListenerApplicationStart" in event_logs[0]
    assert not [log for log in event_logs if password in log]
    logs = {
        "task log": replicated.log,
        "maintenance task log": maintained.log,
        "heartbeats task log": beating.log,
        "srm-control run checkpoints": checkpointed.stdout + checkpointed.stderr,
        "executors": spark_cluster.executor_logs(),
        **{str(p): p.read_text(errors="replace") for p in (spark_cluster.folder / "logs").glob("*.log")},
        **{str(p): p.read_text(errors="replace") for side in secured.values() for p in side.logs.glob("*")},
        **outputs,
    }
    assert re.search(rf"flow {re.escape(flow.name)}", replicated.log), replicated.log[-2000:]
    assert [where for where, text in logs.items() if SASL_PASSWORD in text] == []
    rows = warehouse_rows(tmp_path / "warehouse")
    assert [row for row in rows if topic in row], "no metrics rows for the topic"
    assert [row for row in rows if SASL_PASSWORD in row] == []
    assert not [p for p in (tmp_path / "warehouse").rglob("*") if p.is_file() and password in p.read_bytes()]
