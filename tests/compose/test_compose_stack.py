"""The docker-compose stack end to end (``make test-compose``; not in ``make test``): up on images built
here (conf/compose/offline.yaml), healthy, the Airflow API behind a login, the demo topic replicated by
the flow's replicate DAG run by the scheduler (LocalExecutor) on the stack's Spark cluster, every record
exactly once on us-east; a YAML edit shows up as DAGs; down leaves nothing behind."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator

import pytest

from tests.compose.stack import FLOW, PORTS, Stack, dag_parsed, replicate_demo, running, say, wait_for

pytestmark = [pytest.mark.compose, pytest.mark.timeout(2400)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running(tmp_path_factory.mktemp("compose"), "srm-compose-test") as up:
        yield up


def test_the_api_needs_a_login(stack: Stack) -> None:
    status, _ = stack.request("GET", "/api/v2/dags", token=None)
    assert status in (401, 403), status
    status, _ = stack.request("POST", "/auth/token", {"username": "admin", "password": "wrong"}, None)
    assert status in (401, 403), status
    status, answer = stack.request("GET", "/srm/v2/replications", token=None)
    assert status in (401, 403), (status, answer)
    status, answer = stack.request("GET", "/srm/v2/replications")
    assert status == 200, answer
    assert [r["flow"] for r in answer["replications"]] == ["us-west->us-east"]


def test_the_demo_topic_is_replicated_exactly_once_by_the_dag(stack: Stack) -> None:
    replicate_demo(stack)
    with urllib.request.urlopen(f"http://127.0.0.1:{PORTS['SPARK_UI_PORT']}/json/", timeout=30) as response:
        master = json.loads(response.read())
    apps = {a["name"]: a for a in master["activeapps"] + master["completedapps"]}
    assert master["aliveworkers"] == 2, master
    assert apps["srm replicate us-west->us-east"]["cores"] == 1, apps  # tasks.max of the flow, not every core
    status, answer = stack.request("GET", "/srm/v2/replications")  # the REST API sees the running flow
    assert status == 200 and answer["replications"][0]["state"] != "paused", answer
    status, answer = stack.request("PATCH", f"/api/v2/dags/{FLOW}.replicate", {"is_paused": True})
    assert status == 200, answer


def test_a_yaml_edit_changes_the_dags(stack: Stack) -> None:
    text = stack.yaml.read_text()
    saved = stack.yaml.with_name("srm.yaml.new")  # as editors and git save: a new file renamed over the old
    saved.write_text(text + "  - {source: us-east, target: us-west, topics: [payments]}\n")
    os.replace(saved, stack.yaml)
    found = wait_for(
        "DAG us-east_to_us-west.replicate after the YAML edit",
        lambda: dag_parsed(stack, "us-east_to_us-west.replicate"),
        180,
    )
    assert found
    say("a flow added to the mounted srm.yaml appeared as DAGs")
