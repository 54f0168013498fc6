"""A replicate task killed as Airflow kills one (SIGTERM to its whole process group: marked failed,
timed out, its worker stopped) stops its job gracefully: the copiers commit, the run is marked
stopped, and the next run takes the flow over without fencing anything, exactly once. So does
``srm-control run`` on a plain ``kill PID``."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest

from srm.config import SrmConfig
from srm.devenv.airflow import LocalAirflow
from tests.dags.replicate_dag import PARTITIONS, copying_dag
from tests.integration.test_replicate_continuous import target_records, wait_for
from tests.jobs import Job, exactly_once

pytestmark = pytest.mark.integration
Airflow = Callable[[Path], LocalAirflow]
UNCLEAN = ("unexpected error", "SparkContext was shut down", "did not stop within")


def test_a_killed_replicate_task_stops_its_job_gracefully_and_the_next_run_resumes_exactly_once(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], airflow: Airflow
) -> None:
    topic = unique("af-stop")
    env, writer, dag, dag_log = copying_dag(kafka, tmp_path, topic, airflow)
    try:
        flow = env.flow()
        os.killpg(dag.pid, signal.SIGTERM)  # what Airflow's supervisor sends a task it was told to end
        dag.wait(60)
        text = dag_log.read_text()
        assert f"signal {signal.SIGTERM}: stopping after the copiers commit" in text, text[-4000:]
        assert f"flow {flow.name}: the job stopped (exit code 0)" in text, text[-4000:]
        assert re.search(rf"flow {re.escape(flow.name)}: run \w+ \(epoch \d+\) stopped", text), text[-4000:]
        assert f"flow {flow.name}: the task was killed; its job stopped gracefully" in text  # not a success
        assert text.count("Spark-Submit cmd:") == 1, text[-4000:]  # nor retried
        assert not [line for line in UNCLEAN if line in text], text[-4000:]
        # The next run finds the flow stopped: it fences nothing and goes on from the committed positions.
        job = Job(env.path, flow.source, flow.target, tmp_path / "job.log")
        job.wait_for(r"flow \S+: run \w+ owns epoch \d+")
        assert "had not stopped" not in job.text()
        sent = writer.stop()
        wait_for(lambda: target_records(env, topic) >= sent, 120, "catching up")
        job.process.send_signal(signal.SIGTERM)  # kill PID: srm-control run stops gracefully too
        assert job.process.wait(90) == 0, job.text()[-3000:]
        assert re.search(r"flow \S+: run \w+ \(epoch \d+\) stopped", job.text()), job.text()[-3000:]
        assert not [line for line in UNCLEAN if line in job.text()], job.text()[-3000:]
        assert exactly_once(env, topic, sent, PARTITIONS) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    finally:
        writer.stop()
        if dag.poll() is None:
            os.killpg(dag.pid, signal.SIGKILL)
