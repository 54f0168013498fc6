"""A flow's replicate DAG run by ``airflow dags test`` (a continuous run, as the scheduler would start
it) while a writer keeps its topic busy."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from srm.config import SrmConfig
from srm.devenv.airflow import LocalAirflow
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from tests.integration.test_replicate_continuous import target_records, wait_for
from tests.jobs import Writer
from tests.replication import Env, make_env

PARTITIONS = 4


def copying_dag(
    kafka: SrmConfig, tmp_path: Path, topic: str, airflow: Callable[[Path], LocalAirflow]
) -> tuple[Env, Writer, subprocess.Popen[bytes], Path]:
    """A flow of ``topic`` (PARTITIONS partitions, 10 s leases), a writer on it, and ``airflow dags
    test`` of its replicate DAG in a process group of its own (as Airflow's supervisor runs a task),
    once it has copied records; its output is in the returned log."""
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "task.lease.seconds": 10}])
    ensure_topic(clients.admin_client(env.west), topic, PARTITIONS)
    writer = Writer(env.west, topic, PARTITIONS, burst=60)
    writer.start()
    log = tmp_path / "dag.log"
    command = [
        str(Path(sys.executable).parent / "airflow"),
        "dags",
        "test",
        f"{env.flow().source}_to_{env.flow().target}.replicate",
    ]
    with open(log, "wb") as out:
        dag = subprocess.Popen(
            command, env=airflow(env.path).env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        wait_for(lambda: target_records(env, topic) > 500, 180, "the Airflow run copying")
    except BaseException:
        writer.stop()
        os.killpg(dag.pid, signal.SIGKILL)
        raise
    return env, writer, dag, log
