"""The compose stack's celery profile (``make test-compose``): the same demo flow with the CeleryExecutor,
its tasks run by the airflow-worker service (Redis as the broker)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.compose.stack import FLOW, replicate_demo, running, say

pytestmark = [pytest.mark.compose, pytest.mark.timeout(2400)]


def test_the_celery_profile_runs_the_flow_on_the_celery_worker(tmp_path: Path) -> None:
    with running(tmp_path, "srm-compose-celery", "CeleryExecutor") as stack:
        replicate_demo(stack)
        status, runs = stack.request("GET", f"/api/v2/dags/{FLOW}.maintenance/dagRuns?limit=1")
        assert status == 200 and runs["dag_runs"], runs
        run_id = runs["dag_runs"][0]["dag_run_id"]
        status, tasks = stack.request("GET", f"/api/v2/dags/{FLOW}.maintenance/dagRuns/{run_id}/taskInstances")
        assert status == 200, tasks
        hosts = {t["hostname"] for t in tasks["task_instances"] if t["state"] == "success"}
        assert hosts == {"airflow-worker"}, tasks
        say(f"the maintenance run's tasks ran on {sorted(hosts)}")
