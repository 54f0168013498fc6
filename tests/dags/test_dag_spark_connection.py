"""The flow's Spark connection (``spark.connection_id``): the DAG's jobs run on the master it names,
and a connection that is missing or names a master that cannot work fails the task at once."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from tests.conftest import free_ports
from tests.dags.test_dag_runs import Airflow, ok, run_dag
from tests.helpers import produce, srm_control
from tests.jobs import exactly_once
from tests.replication import make_env, sequenced
from tests.spark_cluster import StandaloneCluster

pytestmark = pytest.mark.integration


def test_the_replicate_dag_runs_its_job_on_the_cluster_of_its_connection(
    spark_cluster: StandaloneCluster,
    kafka: SrmConfig,
    tmp_path: Path,
    unique: Callable[[str], str],
    *,
    airflow: Airflow,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = unique("af-cluster")
    connection = unique("spark_cluster").replace("-", "_")
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{connection.upper()}", json.dumps({"conn_type": "spark", "host": spark_cluster.master})
    )
    env = make_env(
        kafka,
        tmp_path,
        [{"source": "west", "target": "east", "topics": [topic], "tasks.max": 2, "spark.connection_id": connection}],
    )
    flow = env.flow()
    ensure_topic(clients.admin_client(env.west), topic, 4)
    produce(env.west, topic, sequenced(4, 2000))
    run = ok(run_dag(env, airflow, "replicate", {"mode": "available-now"}))
    assert f"Spark master {spark_cluster.master} (Airflow connection {connection!r})" in run.log
    assert exactly_once(env, topic, 2000, 4) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    apps = [a for a in spark_cluster.applications() if a.get("name") == f"srm replicate {flow.name}"]
    assert len(apps) == 1 and apps[0]["cores"] > 0, spark_cluster.applications()


@pytest.mark.parametrize(
    ("connection", "problem"),
    [
        (None, r"cannot be read: .*isn't defined"),
        ({"conn_type": "spark", "host": "spark://127.0.0.1:{port}"}, r"does not answer at 127\.0\.0\.1:\d+"),
        ({"conn_type": "spark", "host": "yarn"}, r"needs HADOOP_CONF_DIR or YARN_CONF_DIR"),
        ({"conn_type": "spark", "host": "lokal[2]"}, r"is not one Spark knows"),
    ],
)
def test_a_bad_spark_connection_fails_the_task_at_once_naming_it(
    connection: dict[str, str] | None,
    problem: str,
    kafka: SrmConfig,
    tmp_path: Path,
    *,
    unique: Callable[[str], str],
    airflow: Airflow,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    name = unique("spark_bad").replace("-", "_")
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    if connection is not None:
        value = json.dumps(connection).replace("{port}", str(free_ports(1)[0]))
        monkeypatch.setenv(f"AIRFLOW_CONN_{name.upper()}", value)
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [], "spark.connection_id": name}])
    run = run_dag(env, airflow, "replicate", {"mode": "available-now"})
    assert run.state == "failed", run.log[-3000:]
    assert re.search(rf"Airflow connection {name!r} \(spark\.connection_id\)[^\n]*{problem}", run.log), run.log[-3000:]
    assert "up_for_retry" not in run.log.lower()  # failed, not retried
    # The failure is the flow's state and last error, with its log (srm.airflow.failures).
    shown = srm_control(env.path, "status", "--json")
    assert shown.returncode == 0, shown.stderr
    (health,) = json.loads(shown.stdout)["flows"]
    assert health["state"] == "failed" and name in health["reason"], health
    assert health["last_error"]["task_id"] == "replicate" and health["last_error"]["log_url"], health
