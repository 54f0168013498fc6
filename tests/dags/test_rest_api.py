"""SRM's REST API as the Airflow plugin serves it: Airflow's API server with a real login (the
simple auth manager with users, not all-admins), a flow that just replicated, its metrics over HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.devenv.airflow import LocalAirflow
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from tests.airflow_api import PASSWORD, ApiServer
from tests.checkpointing import commit, read_from
from tests.helpers import produce
from tests.replication import Env, contents, make_env, replicate, sequenced

pytestmark = pytest.mark.integration


@pytest.fixture
def replicated(kafka: SrmConfig, spark: Any, tmp_path: Path, unique: Callable[[str], str]) -> tuple[Env, str]:
    """A flow that just copied 300 records of one topic (3 partitions)."""
    topic = unique("rest-orders")
    flows = [{"source": "west", "target": "east", "topics": [topic]}]
    env = make_env(kafka, tmp_path, flows, monitoring={"refresh.seconds": 2})
    ensure_topic(clients.admin_client(env.west), topic, 3)
    produce(env.west, topic, sequenced(3, 300))
    replicate(spark, env)
    return env, topic


@pytest.fixture
def api(replicated: tuple[Env, str], airflow_home: Path, tmp_path: Path) -> Iterator[ApiServer]:
    server = ApiServer(LocalAirflow(airflow_home, replicated[0].path), tmp_path)
    try:
        server.wait()
        yield server
    finally:
        server.stop()


def test_metrics_over_rest_need_an_airflow_login_and_report_the_replicated_records(
    replicated: tuple[Env, str], api: ApiServer
) -> None:
    env, topic = replicated
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    path = f"/srm/v2/cluster-metrics/{flow.source}/{flow.target}/record-rate?minutes=30&samples=30"
    assert api.get(path)[0] == 401
    assert api.get(path, "not-a-token")[0] in (401, 403)
    token = api.token("ops", PASSWORD)

    status, body = api.get(path, token)
    assert status == 200, body
    step_s = (body["to"] - body["from"]) / body["samples"] / 1000
    # The flow copies the source's heartbeats too: other tests' may be there.
    assert round(sum(point["value"] for point in body["series"]) * step_s) >= 300
    assert body["sum"] == pytest.approx(sum(point["value"] for point in body["series"]))
    status, body = api.get(f"/srm/v2/topic-metrics/{flow.source}/{flow.target}/{topic}/record-rate", token)
    step_s = (body["to"] - body["from"]) / body["samples"] / 1000
    assert status == 200 and round(sum(p["value"] for p in body["series"]) * step_s) == 300, body  # every record
    for metric in ("byte-rate", "replication-latency-ms", "record-age-ms", "replication-records-lag"):
        status, body = api.get(f"/srm/v2/topic-metrics/{flow.source}/{flow.target}/{topic}/{metric}", token)
        assert status == 200 and body["series"], (metric, body)
        assert body["min"] <= body["avg"] <= body["max"], body
    status, lag = api.get(f"/srm/v2/topic-metrics/{flow.target}/{remote}/replication-records-lag", token)
    assert status == 200 and lag["series"][-1]["value"] == 0 and lag["topic"] == remote, lag
    status, rate = api.get(f"/srm/v2/topic-metrics/{flow.target}/{remote}/byte-rate?hours=1", token)
    assert status == 200 and rate["sum"] > 0, rate

    errors = {
        f"/srm/v2/cluster-metrics/{flow.source}/nowhere/record-rate": (404, "unknown cluster 'nowhere'"),
        f"/srm/v2/cluster-metrics/{flow.source}/{flow.target}/speed": (404, "unknown metric 'speed'"),
        f"/srm/v2/topic-metrics/{flow.source}/{flow.target}/no-such-topic/record-rate": (404, "'no-such-topic'"),
        f"/srm/v2/topic-metrics/{flow.target}/no-such-topic/record-rate": (404, "no flow into"),
        f"/srm/v2/cluster-metrics/{flow.source}/{flow.target}/record-rate?samples=0": (400, "query.samples"),
        f"/srm/v2/cluster-metrics/{flow.source}/{flow.target}/record-rate?minutes=5&hours=1": (400, "not both"),
        f"/srm/v2/cluster-metrics/{flow.source}/{flow.target}/record-rate?hours=x": (400, "query.hours"),
    }
    for url, (code, message) in errors.items():
        status, body = api.get(url, token)
        assert status == code and message in body["detail"], (url, status, body)
    translated_here(env, topic, api, token)
    replications_here(env, topic, api, token)
    assert api.get("/srm/openapi.json")[0] == 401 and api.get("/srm/docs")[0] == 401  # described to users only
    status, openapi = api.get("/srm/openapi.json", token)
    assert status == 200 and "/v2/topic-metrics/{target}/{downstreamTopic}/{metric}" in openapi["paths"]
    status, docs = api.get("/srm/docs", token)
    assert status == 200 and b"/srm/openapi.json" in docs, docs


def translated_here(env: Env, topic: str, api: ApiServer, token: str) -> None:
    """GET /v2/translate: one offset, and a group's committed offsets, where a consumer resumes."""
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    base = f"/srm/v2/translate?source={flow.source}&target={flow.target}"
    assert api.get(f"{base}&topic={topic}&partition=1&offset=50")[0] == 401
    status, body = api.get(f"{base}&topic={topic}&partition=1&offset=50", token)
    assert status == 200 and len(body["offsets"]) == 1, body
    resumed = body["offsets"][0]
    assert (resumed["topic"], resumed["partition"]) == (remote, 1)
    source_record = next(r for r in contents(env.west, topic)[1] if r[4] == 50)
    assert read_from(env.east, remote, 1, resumed["offset"])[0] == source_record[:4]

    group = f"rest-group-{topic}"
    commit(env.west, group, {(topic, p): 10 * p for p in range(3)})
    status, body = api.get(f"{base}&group={group}&live=true", token)
    assert status == 200 and [(o["partition"], o["from_offset"]) for o in body["offsets"]] == [(0, 0), (1, 10), (2, 20)]
    status, back = api.get(f"{base}&topic={remote}&partition=1&offset={resumed['offset']}&direction=backward", token)
    assert status == 200 and back["offsets"][0]["offset"] == 50 and back["offsets"][0]["topic"] == topic, back

    for query, (code, message) in {
        "": (400, "give a group, or all of topic, partition and offset"),
        f"&group={group}&topic={topic}": (400, "give either a group or a topic"),
        "&group=,": (400, "a group needs a name"),
        "&group=nobody-has-this-group": (404, "no checkpoints for group 'nobody-has-this-group'"),
        f"&topic={topic}&partition=9&offset=0": (404, "partition 9 does not exist"),
        f"&group={group}&direction=sideways": (400, "query.direction"),
    }.items():
        status, body = api.get(base + query, token)
        assert status == code and message in body["detail"], (query, status, body)


def replications_here(env: Env, topic: str, api: ApiServer, token: str) -> None:
    """GET /v2/replications: the flow's state and why, its lag; paused once its DAG is paused."""
    flow = env.flow()
    assert api.get("/srm/v2/replications")[0] == 401
    deadline = time.monotonic() + 30  # the monitor's first observation of the flow may still be running
    while True:
        status, body = api.get("/srm/v2/replications", token)
        assert status == 200, body
        (entry,) = [r for r in body["replications"] if r["flow"] == flow.name]
        if entry["state"] != "unknown" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if entry["heartbeat_age_s"] is None:  # the session's source may hold other tests' heartbeats, copied too
        assert (entry["state"], entry["reason"]) == ("stalled", "no heartbeat has been replicated yet"), entry
    else:
        assert entry["state"] == ("running" if entry["heartbeat_age_s"] <= 120 else "stalled"), entry
    assert entry["lag"][topic] == 0 and entry["last_error"] is None, entry
    # The DAGs reach Airflow's database paused (dags_are_paused_at_creation), as a new deployment's do.
    LocalAirflow(api.airflow.home, env.path).airflow("dags", "reserialize")
    paused = ("paused", f"DAG {flow.source}_to_{flow.target}.replicate is paused in Airflow")
    deadline = time.monotonic() + 30  # the monitor's next round (every 2 s here) sees it
    while time.monotonic() < deadline:
        (entry,) = api.get("/srm/v2/replications", token)[1]["replications"]
        if (entry["state"], entry["reason"]) == paused:
            break
        time.sleep(1)
    assert (entry["state"], entry["reason"]) == paused, entry
