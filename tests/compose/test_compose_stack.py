"""The docker-compose stack end to end (``make test-compose``; not in ``make test``): up on images built
here (conf/compose/offline.yaml), healthy, the Airflow API behind a login, the demo topic replicated by
the flow's replicate DAG run by the scheduler (LocalExecutor) on the stack's Spark cluster, every record
exactly once on us-east; the stack's Prometheus scrapes the monitoring service with the token from .env
and loads the alert rules; a YAML edit shows up as DAGs; down leaves nothing behind."""

from __future__ import annotations

import json
import os
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from srm.devenv.demo import DEMO_PARTITIONS, DEMO_TOPIC
from srm.paths import project_root
from tests.compose.stack import FLOW, Stack, dag_parsed, replicate_demo, running, say, wait_for

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
    with urllib.request.urlopen(f"http://127.0.0.1:{stack.ports['SPARK_UI_PORT']}/json/", timeout=30) as response:
        master = json.loads(response.read())
    apps = {a["name"]: a for a in master["activeapps"] + master["completedapps"]}
    assert master["aliveworkers"] == 2, master
    assert apps["srm replicate us-west->us-east"]["cores"] == 1, apps  # tasks.max of the flow, not every core
    status, answer = stack.request("GET", "/srm/v2/replications")  # the REST API sees the running flow
    assert status == 200 and answer["replications"][0]["state"] != "paused", answer
    status, answer = stack.request("PATCH", f"/api/v2/dags/{FLOW}.replicate", {"is_paused": True})
    assert status == 200, answer


def prometheus(stack: Stack, path: str) -> Any:
    url = f"http://127.0.0.1:{stack.ports['PROMETHEUS_PORT']}{path}"
    with urllib.request.urlopen(url, timeout=30) as response:
        answer = json.loads(response.read())
    assert answer["status"] == "success", answer
    return answer["data"]


def query(stack: Stack, expr: str) -> dict[tuple[tuple[str, str], ...], float]:
    found = prometheus(stack, "/api/v1/query?" + urllib.parse.urlencode({"query": expr}))["result"]
    return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in found}


def test_prometheus_scrapes_the_monitoring_service_and_loads_the_alert_rules(stack: Stack) -> None:
    """After the demo flow ran: the scrape with the token of .env is up, the clusters reachable, the demo
    topic's lag 0 on every partition; the endpoint refuses a scrape without the token; the rules load."""
    assert stack.request("GET", "/srm/metrics", token=None)[0] == 401
    assert stack.request("GET", "/srm/metrics", token="not-the-token")[0] == 401

    def scraped() -> dict[str, Any] | None:
        targets = prometheus(stack, "/api/v1/targets")["activeTargets"]
        up = [t for t in targets if t["labels"]["job"] == "srm" and t["health"] == "up"]
        return up[0] if up and query(stack, 'srm_flow_state{source="us-west",target="us-east"} == 1') else None

    target = wait_for("Prometheus scraping /srm/metrics of airflow-apiserver", scraped, 180)
    say(f"Prometheus scrapes {target['scrapeUrl']}: up, {target['lastScrapeDuration']:.3f} s")
    reachable = query(stack, "srm_cluster_reachable")
    assert {dict(k)["cluster"]: v for k, v in reachable.items()} == {"us-west": 1.0, "us-east": 1.0}, reachable
    labels = f'flow="us-west->us-east",topic="{DEMO_TOPIC}"'

    def caught_up() -> dict[tuple[tuple[str, str], ...], float] | None:
        found = query(stack, f"srm_replication_records_lag{{{labels}}}")
        return found if len(found) == DEMO_PARTITIONS and set(found.values()) == {0.0} else None

    lag = wait_for("the demo topic's lag 0 on every partition on Prometheus", caught_up, 120)  # copied before
    loaded = {r["name"] for g in prometheus(stack, "/api/v1/rules")["groups"] for r in g["rules"]}
    rules = yaml.safe_load((project_root() / "conf" / "prometheus" / "srm-alerts.yaml").read_text())
    assert loaded == {r["alert"] for g in rules["groups"] for r in g["rules"]}, loaded
    say(f"{len(lag)} partitions of lag 0 and {len(loaded)} alert rules on the stack's Prometheus")


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
