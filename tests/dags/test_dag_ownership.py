"""The flow's Airflow DAG and ``srm-control run`` at once: the newer run takes the flow over, the
Airflow task fails at once (not retried) saying who has it, and no record is lost or copied twice."""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from srm.config import SrmConfig
from srm.devenv.airflow import LocalAirflow
from srm.spark.submit import DRIVER_HEAP_FLOOR
from tests.dags.replicate_dag import PARTITIONS, copying_dag
from tests.integration.test_replicate_continuous import target_records, wait_for
from tests.jobs import Job, exactly_once

pytestmark = pytest.mark.integration
Airflow = Callable[[Path], LocalAirflow]


def test_srm_control_run_takes_the_flow_over_from_the_airflow_run(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], airflow: Airflow
) -> None:
    topic = unique("af-own")
    env, writer, dag, dag_log = copying_dag(kafka, tmp_path, topic, airflow)
    flow = env.flow()
    try:
        # srm-control run of the same flow from another file, with another tasks.max
        data = yaml.safe_load(env.path.read_text())
        data["flows"][0]["tasks.max"] = 2
        other = tmp_path / "other.yaml"
        other.write_text(yaml.safe_dump(data))
        job = Job(other, flow.source, flow.target, tmp_path / "job.log")
        claim = job.wait_for(r"run (\w+) \(epoch \d+\) takes over from run \w+ \(Airflow task [\w.-]+\.replicate")
        assert dag.wait(180) != 0
    finally:
        if dag.poll() is None:
            os.killpg(dag.pid, signal.SIGKILL)  # its spark-submit too, which ignores SIGTERM
    text = dag_log.read_text()
    assert f"flow {flow.name} was taken over by run {claim.group(1)} (srm-control run" in text
    assert "not retried" in text and "state=failed" in text
    submitted = re.search(r"Spark-Submit cmd: (.*)", text)
    assert submitted and f"-Xms{DRIVER_HEAP_FLOOR}" in submitted[1]  # a continuous job's driver (srm.spark.submit)
    copied = target_records(env, topic)
    wait_for(lambda: target_records(env, topic) > copied, 60, "the srm-control run copying")
    sent = writer.stop()
    wait_for(lambda: target_records(env, topic) >= sent, 120, "catching up")
    assert job.stop() == 0, job.text()[-3000:]
    assert exactly_once(env, topic, sent, PARTITIONS) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
