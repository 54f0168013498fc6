"""A real Prometheus (Debian's package, on loopback) scrapes the monitoring service under Airflow's
API server with its bearer token while a flow copies: the records behind return to 0, each of
MirrorMaker 2's metric names answers with MM2's labels, every panel of the Grafana dashboard returns
data, and the alert rules load."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from srm.config import SrmConfig
from srm.devenv.airflow import LocalAirflow
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.offsets.checkpointing import CheckpointPass
from srm.paths import project_root
from tests.airflow_api import PASSWORD, USER, ApiServer
from tests.checkpointing import commit
from tests.conftest import free_ports
from tests.helpers import produce
from tests.replication import Env, make_env, replicate, sequenced

pytestmark = pytest.mark.integration
SCRAPE_S = 2
WAIT_S = 90
DASHBOARD = project_root() / "conf" / "grafana" / "srm-replication.json"
RULES = project_root() / "conf" / "prometheus" / "srm-alerts.yaml"
MM2_SOURCE = [
    f"kafka_connect_mirror_mirrorsourceconnector_{name}"
    for name in (
        "record_count",
        "record_rate",
        "byte_count",
        "byte_rate",
        *(f"{m}{k}" for m in ("record_age_ms", "replication_latency_ms") for k in ("", "_min", "_max", "_avg")),
    )
]
MM2_CHECKPOINT = [
    f"kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms{k}" for k in ("", "_min", "_max", "_avg")
]


class Prometheus:
    """``prometheus`` scraping one target every SCRAPE_S seconds, its data in a temporary folder."""

    def __init__(self, folder: Path, target: str, metrics_path: str, token_file: Path) -> None:
        binary = shutil.which("prometheus")
        assert binary, "prometheus is missing: make test installs it (make prometheus)"
        self.port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": f"{SCRAPE_S}s", "evaluation_interval": f"{SCRAPE_S}s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [
                {
                    "job_name": "srm",
                    "metrics_path": metrics_path,
                    "authorization": {"type": "Bearer", "credentials_file": str(token_file)},
                    "static_configs": [{"targets": [target]}],
                }
            ],
        }
        path = folder / "prometheus.yml"
        path.write_text(yaml.safe_dump(config))
        self.log = folder / "prometheus.log"
        command = [
            binary,
            f"--config.file={path}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
        ]
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)

    def get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/query", query=expr)["result"])

    def wait(self, check: Callable[[], Any], what: str) -> Any:
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                found = check()
            except OSError:
                found = None
            if found:
                return found
            time.sleep(1)
        raise AssertionError(f"not within {WAIT_S} s: {what}\n{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture
def scraped(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], airflow_home: Path
) -> Iterator[tuple[Env, str, ApiServer, Prometheus]]:
    """A flow of one topic with 300 records not copied yet, the API server, and Prometheus scraping it."""
    topic = unique("prom-orders")
    token = tmp_path / "scrape-token"
    token.write_text("scrape-" + unique("token") + "\n")
    env = make_env(
        kafka,
        tmp_path,
        [{"source": "west", "target": "east", "topics": [topic]}],
        monitoring={"prometheus.token.file": str(token), "refresh.seconds": 2},
    )
    ensure_topic(clients.admin_client(env.west), topic, 3)
    produce(env.west, topic, sequenced(3, 300))
    api = ApiServer(LocalAirflow(airflow_home, env.path), tmp_path)
    prometheus: Prometheus | None = None
    try:
        api.wait()
        prometheus = Prometheus(tmp_path, f"127.0.0.1:{api.port}", "/srm/metrics", token)
        yield env, topic, api, prometheus
    finally:
        if prometheus is not None:
            prometheus.stop()
        api.stop()


def panel_queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) of every target of every panel, rows' panels included."""
    found = []
    for panel in dashboard["panels"]:
        for inner in [panel, *panel.get("panels", [])]:
            for target in inner.get("targets", []):
                if target.get("expr"):
                    found.append((inner.get("title", ""), target["expr"]))
    return found


def test_prometheus_scrapes_lag_to_zero_mm2_names_and_every_dashboard_panel(
    scraped: tuple[Env, str, ApiServer, Prometheus], spark: Any, unique: Callable[[str], str]
) -> None:
    env, topic, api, prometheus = scraped
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    assert api.get("/srm/metrics")[0] == 401  # the scrape needs the bearer token
    labels = f'flow="{flow.name}",topic="{topic}"'

    # Before the flow ran: 300 records behind, the oldest an hour old (sequenced() backdates them).
    behind = prometheus.wait(
        lambda: prometheus.query(f"sum(srm_replication_records_lag{{{labels}}}) == 300"), "300 records behind"
    )
    assert behind
    [age] = prometheus.query(f"max(srm_replication_oldest_record_age_seconds{{{labels}}})")
    assert 3000 < float(age["value"][1]) < 4000, age

    replicate(spark, env)
    commit(env.west, unique("prom-readers"), {(topic, p): 50 for p in range(3)})
    CheckpointPass(env.config, flow).run()

    prometheus.wait(lambda: prometheus.query(f"sum(srm_replication_records_lag{{{labels}}}) == 0"), "the lag back to 0")
    prometheus.wait(
        lambda: prometheus.query(f"max(srm_replication_oldest_record_age_seconds{{{labels}}}) == 0"), "RPO 0"
    )
    # MirrorMaker 2's names, with its labels: the remote topic, each partition.
    for name in MM2_SOURCE:
        series = prometheus.wait(lambda n=name: prometheus.query(f'{n}{{topic="{remote}"}}'), name)
        assert {s["metric"]["partition"] for s in series} == {"0", "1", "2"}, (name, series)
        assert all(s["metric"]["target"] == flow.target and s["metric"]["source"] == flow.source for s in series)
    [count] = prometheus.query(f'sum(kafka_connect_mirror_mirrorsourceconnector_record_count{{topic="{remote}"}})')
    assert float(count["value"][1]) == 300, count
    for name in MM2_CHECKPOINT:
        series = prometheus.wait(lambda n=name: prometheus.query(f'{n}{{topic="{remote}"}}'), name)
        assert {s["metric"]["group"] for s in series} == {next(iter(series))["metric"]["group"]}
        assert {s["metric"]["partition"] for s in series} == {"0", "1", "2"}, (name, series)
    # One state at a time, the one the REST API shows (running when other tests' heartbeats, which
    # the flow copies with the session's heartbeats topic, are fresh; else stalled).
    states = prometheus.query(f'srm_flow_state{{flow="{flow.name}"}} == 1')
    assert len(states) == 1, states
    token = api.token(USER, PASSWORD)
    [shown] = [f for f in api.get("/srm/v2/replications", token)[1]["replications"] if f["flow"] == flow.name]
    assert states[0]["metric"]["state"] == shown["state"] in ("running", "stalled"), (states, shown)

    # Every panel of the dashboard answers with data from this Prometheus.
    queries = panel_queries(json.loads(DASHBOARD.read_text()))
    assert len(queries) >= 10, queries
    for title, expr in queries:  # a rate() needs two scrapes of a series that just appeared: wait for them
        concrete = expr.replace("$__rate_interval", "1m").replace("$__interval", "1m")
        concrete = concrete.replace("$flow", ".*").replace("$topic", ".*").replace("${flow}", ".*")
        concrete = concrete.replace("${topic}", ".*")
        prometheus.wait(lambda q=concrete: prometheus.query(q), f"panel {title!r}: {concrete}")
    # The alert rules loaded (promtool's own tests of them run in tests/unit/test_alert_rules.py).
    groups = prometheus.get("/api/v1/rules")["groups"]
    assert {g["name"] for g in groups} == {"srm"} and groups[0]["rules"], groups
