"""The REST app without Kafka or Airflow: the per-topic table over warehouse rows, the Replications
page's files, and that every route asks the auth dependency first."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi import HTTPException
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from srm.config import load_config
from srm.service.app import create_app
from srm.storage.warehouse import METRICS, Warehouse
from tests.helpers import offline_config


def config_file(tmp_path: Path) -> Path:
    return offline_config(tmp_path)


def row(topic: str, partition: int, records: int, latency: float | None, seconds_ago: float) -> dict[str, Any]:
    at = datetime.fromtimestamp(time.time() - seconds_ago, UTC)
    return {
        "flow": "west->east",
        "topic": topic,
        "partition": partition,
        "target_topic": f"west.{topic}",
        "records": records,
        "bytes": records * 100,
        "latency_avg_ms": latency,
        "record_age_avg_ms": None if latency is None else latency / 2,
        "started_at": at,
        "finished_at": at,
    }


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    path = config_file(tmp_path)
    rows = [
        row("orders", 0, 100, 10.0, 120),
        row("orders", 1, 300, 30.0, 60),
        row("orders", 0, 0, None, 30),  # an idle batch: no latency, weighs nothing
        row("orders", 0, 50, 5.0, 3 * 3600),  # outside a one-hour window
        row("payments", 0, 10, 100.0, 10),
    ]
    Warehouse(tmp_path / "warehouse").append(METRICS, rows, "test", 1)
    app = create_app(path, user=lambda: None, groups_reader=lambda: None, flow_access=lambda *_: True)
    return TestClient(app)


def test_the_topic_table_sums_records_and_weighs_latency_by_records_inside_the_window(client: TestClient) -> None:
    response = client.get("/v2/replications/west/east/topics?minutes=60")
    assert response.status_code == 200, response.text
    body = response.json()
    topics = {t["topic"]: t for t in body["topics"]}
    assert sorted(topics) == ["orders", "payments"]
    orders = topics["orders"]
    assert (orders["remote_topic"], orders["records"], orders["bytes"]) == ("west.orders", 400, 40_000)
    assert orders["latency_avg_ms"] == pytest.approx((100 * 10.0 + 300 * 30.0) / 400)
    assert orders["record_age_avg_ms"] == pytest.approx((100 * 5.0 + 300 * 15.0) / 400)
    assert orders["record_rate"] == pytest.approx(400 / ((body["to"] - body["from"]) / 1000))
    assert topics["payments"]["records"] == 10
    whole = {t["topic"]: t["records"] for t in client.get("/v2/replications/west/east/topics?hours=4").json()["topics"]}
    assert whole["orders"] == 450


def test_the_topic_table_reads_rolled_up_hours_from_the_rollup_with_the_same_figures(tmp_path: Path) -> None:
    from srm.maintenance.metrics_rollup import roll_up

    path = config_file(tmp_path)
    config = load_config(path)
    warehouse = Warehouse(config.storage.warehouse)
    rows = [row(t, p, 10 + 7 * i + p, 5.0 + i, 600 * i + 37) for i in range(40) for t in ("a", "b") for p in range(2)]
    rows += [row("a", 0, 0, None, 5000), row("b", 1, 3, None, 7000)]  # no latency: weighs nothing
    warehouse.append(METRICS, rows, "test", 1)
    client = TestClient(create_app(path, user=lambda: None, groups_reader=lambda: None, flow_access=lambda *_: True))

    def table() -> dict[str, Any]:
        found = client.get("/v2/replications/west/east/topics?hours=5").json()["topics"]
        return {t["topic"]: {k: v for k, v in t.items() if k not in ("record_rate", "byte_rate")} for t in found}

    raw = table()
    rolled = roll_up(warehouse, config.enabled_flows()[0])
    assert rolled[0].hours >= 4 and rolled[0].rows_written > 0, rolled  # hours inside the window rolled up
    mixed = table()
    assert mixed.keys() == raw.keys() == {"a", "b"}
    for topic, figures in raw.items():
        assert mixed[topic]["records"] == figures["records"] and mixed[topic]["bytes"] == figures["bytes"]
        assert mixed[topic]["latency_avg_ms"] == pytest.approx(figures["latency_avg_ms"])
        assert mixed[topic]["record_age_avg_ms"] == pytest.approx(figures["record_age_avg_ms"])
        assert mixed[topic]["last_copied_at"] == figures["last_copied_at"]


def test_the_topic_table_of_an_unknown_flow_is_a_404(client: TestClient) -> None:
    response = client.get("/v2/replications/east/west/topics")
    assert response.status_code == 404 and "no flow east->west" in response.json()["detail"]
    response = client.get("/v2/replications/west/nowhere/topics")
    assert response.status_code == 404 and "unknown cluster 'nowhere'" in response.json()["detail"]


def test_the_page_serves_its_files_and_nothing_outside_its_folder(client: TestClient) -> None:
    page = client.get("/ui/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'src="replications.js"' in page.text and 'src="vendor/uPlot.iife.min.js"' in page.text
    for name, kind in {
        "replications.js": "javascript",
        "replications.css": "css",
        "vendor/uPlot.iife.min.js": "javascript",
    }.items():
        response = client.get(f"/ui/{name}")
        assert response.status_code == 200 and kind in response.headers["content-type"], name
    assert client.get("/ui", follow_redirects=False).headers["location"] == "ui/"
    for outside in ("%2e%2e/app.py", "..%2fapp.py", "nothing.js"):
        response = client.get(f"/ui/{outside}")
        assert response.status_code == 404 and "in the Replications page" in response.json()["detail"], outside
    assert not any(path.startswith("/ui") for path in client.get("/openapi.json").json()["paths"])


def test_every_route_needs_the_airflow_user_first(tmp_path: Path) -> None:
    def nobody() -> None:
        raise HTTPException(401, "Not authenticated")

    path = config_file(tmp_path)
    app = create_app(path, user=nobody, groups_reader=lambda: None, flow_access=lambda *_: True)
    client = TestClient(app)
    samples = {
        "source": "west",
        "target": "east",
        "metric": "record-rate",
        "upstreamTopic": "orders",
        "downstreamTopic": "west.orders",
        "name": "replications.js",
    }
    checked = []
    for route in app.routes:  # every route the app has, as FastAPI routes requests
        assert isinstance(route, APIRoute), route
        if route.path == "/metrics":  # Prometheus' bearer token of its own: test_the_scrape_endpoint...
            continue
        url = re.sub(r"\{(\w+)(:path)?\}", lambda m: samples[m.group(1)], route.path)
        assert client.get(url).status_code == 401, route.path
        checked.append(route.path)
    assert {"/openapi.json", "/docs", "/v2/replications", "/v2/translate", "/ui/{name:path}"} <= set(checked)


def two_flows(folder: Path, broken: bool = False) -> Path:
    """Flows west->east and east->west between clusters where nothing listens; with ``broken`` a
    third flow west->north whose option does not parse (line 15 of the file)."""
    flows = "  - {source: west, target: east}\n  - {source: east, target: west}\n"
    if broken:
        flows += "  - source: west\n    target: north\n    tasks.max: many\n"
    text = (
        "clusters:\n"
        "  west: {bootstrap.servers: '127.0.0.1:1'}\n"
        "  east: {bootstrap.servers: '127.0.0.1:2'}\n"
        "  north: {bootstrap.servers: '127.0.0.1:3'}\n"
        "storage:\n"
        f"  warehouse: {folder / 'warehouse'}\n"
        f"  plan_logs: {folder / 'plan-logs'}\n"
        "monitoring:\n"
        "  prometheus.token.file: token\n"
        "flows:\n" + flows
    )
    (folder / "token").write_text("s3cret-scrape-token\n")
    path = folder / "srm.yaml"
    path.write_text(text)
    return path


def test_a_user_reads_only_the_flows_whose_dags_they_may_read(tmp_path: Path) -> None:
    allowed = {"west->east"}
    app = create_app(
        two_flows(tmp_path),
        user=lambda: "alice",
        groups_reader=lambda: None,
        paused=lambda ids: {},
        flow_access=lambda user, flow: user == "alice" and flow.name in allowed,
        refresh_s=1.0,
    )
    client = TestClient(app)
    try:
        assert client.get("/v2/cluster-metrics/west/east/record-rate").status_code == 200
        refused = client.get("/v2/cluster-metrics/east/west/record-rate")
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"] == (
            "not allowed to read flow east->west: it needs read access to DAG east_to_west.replicate"
        )
        assert client.get("/v2/replications/east/west/topics").status_code == 403
        assert client.get("/v2/translate?source=east&target=west&group=g").status_code == 403
        app.state.monitor.probe_timeout_s = 0.5  # nothing listens: no need to wait 5 s
        app.state.monitor.start().wait_round(1)
        listed = client.get("/v2/replications").json()
        assert [f["flow"] for f in listed["replications"]] == ["west->east"]
        assert {c["cluster"] for c in listed["clusters"]} == {"west", "east"}
    finally:
        app.state.monitor.stop()


def test_a_broken_flow_is_listed_with_its_line_and_the_others_are_served(tmp_path: Path) -> None:
    path = two_flows(tmp_path, broken=True)
    app = create_app(
        path, user=lambda: None, groups_reader=lambda: None, paused=lambda ids: {}, flow_access=lambda *_: True
    )
    client = TestClient(app)
    try:
        assert client.get("/v2/cluster-metrics/west/east/record-rate").status_code == 200
        missing = client.get("/v2/cluster-metrics/west/north/record-rate")
        assert missing.status_code == 404 and missing.json()["detail"] == "no flow west->north in srm.yaml"
        app.state.monitor.probe_timeout_s = 0.5  # nothing listens: no need to wait 5 s
        app.state.monitor.start().wait_round(1)
        listed = client.get("/v2/replications").json()
        assert sorted(f["flow"] for f in listed["replications"]) == ["east->west", "west->east"]
        [invalid] = listed["invalid"]
        assert invalid["flow"] == "west->north" and invalid["state"] == "invalid", invalid
        assert invalid["reason"].startswith("srm.yaml:15: flows[2].tasks.max: Input should be a valid integer"), invalid
        body = client.get("/v2/replications").text
        assert str(tmp_path) not in body and "127.0.0.1" not in body, body  # no path, no bootstrap servers
        path.write_text(path.read_text().replace("many", "2"))  # fixed: served at the next request
        assert client.get("/v2/cluster-metrics/west/north/record-rate").status_code == 200
    finally:
        app.state.monitor.stop()


def test_the_scrape_endpoint_needs_its_bearer_token(tmp_path: Path) -> None:
    app = create_app(
        two_flows(tmp_path), user=lambda: None, groups_reader=lambda: None, paused=lambda ids: {}, refresh_s=1.0
    )
    client = TestClient(app)
    try:
        assert client.get("/metrics").status_code == 401
        assert client.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
        app.state.monitor.probe_timeout_s = 0.5  # nothing listens: no need to wait 5 s
        app.state.monitor.start().wait_round(1)
        scraped = client.get("/metrics", headers={"Authorization": "Bearer s3cret-scrape-token"})
        assert scraped.status_code == 200 and scraped.headers["content-type"].startswith("text/plain")
        assert 'srm_cluster_reachable{cluster="west"} 0.0' in scraped.text, scraped.text
        assert 'srm_flow_state{flow="west->east",source="west",state="unreachable",target="east"} 1.0' in scraped.text
        assert "s3cret" not in scraped.text and "127.0.0.1" not in scraped.text
    finally:
        app.state.monitor.stop()
    off = create_app(config_file(tmp_path), user=lambda: None, groups_reader=lambda: None)
    response = TestClient(off).get("/metrics")
    assert response.status_code == 404 and "monitoring.prometheus.token.file" in response.json()["detail"]


def test_a_metrics_table_written_before_the_aborted_column_takes_it_at_the_next_append(tmp_path: Path) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    from srm.storage.warehouse import _schemas

    warehouse = Warehouse(tmp_path / "warehouse")
    schema = _schemas()[METRICS]
    old = pa.schema([f for f in schema if f.name != "aborted"])  # the table as an earlier version made it
    first = row("orders", 0, 10, 1.0, 60)
    write_deltalake(warehouse.path(METRICS), pa.Table.from_pylist([first], schema=old), mode="append")
    assert warehouse.append(METRICS, [{**row("orders", 0, 20, 1.0, 30), "aborted": 2}], "test", 1)
    table = DeltaTable(warehouse.path(METRICS)).to_pyarrow_table()
    assert "aborted" in table.schema.names
    assert sorted((r["records"], r["aborted"]) for r in table.to_pylist()) == [(10, None), (20, 2)]
