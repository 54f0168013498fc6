"""The Prometheus alert rules (conf/prometheus) and the Grafana dashboard (conf/grafana) against the exporter.

promtool checks the rules and runs their unit tests (conf/prometheus/srm-alerts.test.yaml), parses every
query of the dashboard and evaluates it over the series srm/service/exposition.py renders for a flow that
copies; the metric names and label matchers of the rules and the dashboard must be ones the exporter emits.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from srm.config.model import Flow
from srm.config.settings import FlowSettings
from srm.operations.health import FlowHealth
from srm.paths import project_root
from srm.service.exposition import render
from srm.service.snapshot import BrokenFlow, ClusterState, Copied, FlowView, PartitionFigures, Snapshot

RULES = project_root() / "conf" / "prometheus" / "srm-alerts.yaml"
RULE_TESTS = project_root() / "conf" / "prometheus" / "srm-alerts.test.yaml"
DASHBOARD = project_root() / "conf" / "grafana" / "srm-replication.json"

METRIC = re.compile(r"\b(?:srm|kafka_connect_mirror)_[A-Za-z0-9_:]*")
SELECTOR = re.compile(r"\b((?:srm|kafka_connect_mirror)_[A-Za-z0-9_:]*)\s*\{([^}]*)\}")
LABEL_VALUES = re.compile(r"^label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\)$")
MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
# What Grafana puts in place of the variables when they are "All" (allValue) and of $__rate_interval.
SUBSTITUTES = {"$flow": ".*", "$topic": ".*", "$__rate_interval": "1m"}


def promtool() -> str:
    found = shutil.which("promtool") or ("/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None)
    if found is None:
        pytest.fail("promtool is missing: make test installs it (make prometheus)")
    return found


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"promtool {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


def rule_exprs() -> dict[str, str]:
    groups = yaml.safe_load(RULES.read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def panels(holder: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, rows' folded panels included; rows themselves are not yielded."""
    for panel in holder.get("panels", []):
        if panel.get("type") == "row":
            yield from panels(panel)
        else:
            yield panel


def dashboard_exprs() -> list[tuple[str, str]]:
    """(panel title, expr) of every target."""
    return [(panel["title"], target.get("expr", "")) for panel in panels(dashboard()) for target in panel["targets"]]


def variable_queries() -> list[str]:
    return [variable["definition"] for variable in dashboard()["templating"]["list"] if variable.get("type") == "query"]


def substituted(expr: str) -> str:
    for name, value in SUBSTITUTES.items():
        expr = expr.replace(name, value)
    return expr


def populated_snapshot(*, full: bool = True) -> Snapshot:
    """A flow with a figure in every family, a cluster, a broken flow.

    Not ``full``: a flow that copies before its first heartbeat and checkpoint, and lost nothing.
    """
    flow = Flow(source="us-west", target="us-east", settings=FlowSettings())
    now = datetime.now(UTC)
    now_ms = int(now.timestamp() * 1000)
    ages = {f"{m}_{k}_ms": 5.0 for m in ("record_age", "latency") for k in ("min", "avg", "max")}
    lease = {
        "target_topic": "us-west.orders",
        "partition": 0,
        "records": 10,
        "bytes": 1000,
        "started_at": now - timedelta(seconds=10),
        "finished_at": now,
        **ages,
    }
    checkpoint = {"group": "billing", "topic": "orders", "partition": 0, "latency_ms": 1, "min": 1, "max": 2, "avg": 1}
    ages_s = (1.0, 2.0) if full else (None, None)
    health = FlowHealth(flow.name, flow.source, flow.target, heartbeat_age_s=ages_s[0], checkpoint_age_s=ages_s[1])
    view = FlowView(
        flow=flow,
        health=health,
        partitions=(PartitionFigures("orders", 0, end=10, next_offset=5, lag=5, oldest_ms=now_ms - 1000),),
        leases=(lease,),
        checkpoints=(checkpoint,),
        lost=(("orders", 0, 3),) if full else (),
        copied=(Copied("orders", 0, "us-west.orders", 10, 1000, 2),),
        observed_ms=now_ms,
    )
    return Snapshot(
        taken_ms=now_ms,
        flows={flow.name: view},
        clusters={"us-west": ClusterState("us-west", True, now_ms, now_ms)},
        broken=(BrokenFlow("us-west->eu", ("srm.yaml:3: bad",)),),
    )


def exported() -> dict[str, set[str] | None]:
    """Every series name the exporter can emit (counters with ``_total``), with its label names when known."""
    names: dict[str, set[str] | None] = {}
    kinds = dict(re.findall(r"^# TYPE (\S+) (\S+)$", render(Snapshot(taken_ms=1)).decode(), re.MULTILINE))
    for name, kind in kinds.items():
        names[f"{name}_total" if kind == "counter" and not name.endswith("_total") else name] = None
    for family in text_string_to_metric_families(render(populated_snapshot()).decode()):
        for sample in family.samples:
            labels = names.get(sample.name) or set()
            names[sample.name] = labels | set(sample.labels)
    return names


def test_promtool_accepts_the_rules() -> None:
    done = run_promtool("check", "rules", str(RULES))
    assert "SUCCESS" in done.stdout, done.stdout


def test_the_rules_pass_their_unit_tests() -> None:
    done = run_promtool("test", "rules", str(RULE_TESTS))
    assert "SUCCESS" in done.stdout, done.stdout


def test_every_alert_has_for_severity_summary_and_description() -> None:
    rules = [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]
    assert {rule["alert"] for rule in rules} >= {
        "SrmFlowFailed",
        "SrmFlowStalled",
        "SrmClusterUnreachable",
        "SrmRpoHigh",
        "SrmDataLoss",
        "SrmHeartbeatOld",
        "SrmCheckpointOld",
        "SrmMonitoringStale",
        "SrmConfigUnusable",
    }
    tested = RULE_TESTS.read_text()
    for rule in rules:
        assert "for" in rule, rule["alert"]
        assert rule["labels"]["severity"] in ("page", "ticket"), rule["alert"]
        assert rule["annotations"]["summary"] and rule["annotations"]["description"], rule["alert"]
        assert f"alertname: {rule['alert']}\n" in tested, f"{rule['alert']} has no unit test"


def test_every_panel_has_a_query() -> None:
    found = list(panels(dashboard()))
    assert found
    for panel in found:
        exprs = [target.get("expr", "").strip() for target in panel.get("targets", [])]
        assert any(exprs), f"panel {panel['title']!r} has no target with an expr"


def test_the_variables_select_everything_when_all() -> None:
    variables = {variable["name"]: variable for variable in dashboard()["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert variables["flow"]["definition"] == "label_values(srm_flow_state, flow)"
    for name in ("flow", "topic"):
        assert variables[name]["includeAll"] and variables[name]["allValue"] == ".*", name
    for title, expr in dashboard_exprs():
        for label, op, value in MATCHER.findall(expr):
            if "$" in value:
                assert op == "=~", f"{title}: {label}{op}{value!r} matches nothing when the variable is All"
    for panel in panels(dashboard()):
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]


def test_every_query_parses(tmp_path: Path) -> None:
    """Each query of the dashboard, variables substituted, as a recording rule that promtool checks."""
    queries = [expr for _, expr in dashboard_exprs()]
    queries += [LABEL_VALUES.sub(r"\1", query) for query in variable_queries()]  # the selector of label_values()
    rules = [{"record": f"dashboard:query_{i}", "expr": substituted(q)} for i, q in enumerate(queries)]
    checked = tmp_path / "dashboard-queries.yaml"
    checked.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    run_promtool("check", "rules", str(checked))


def series_of(snapshot: Snapshot) -> list[dict[str, str]]:
    """The snapshot's exposition as promtool input series: gauges constant, counters rising, every 15 s."""
    found = []
    for family in text_string_to_metric_families(render(snapshot).decode()):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            step = "+1" if family.type == "counter" else ""
            found.append({"series": f"{sample.name}{{{labels}}}", "values": f"{sample.value}{step}x20"})
    return found


def test_every_query_returns_data_from_the_exporters_series(tmp_path: Path) -> None:
    """Each query, variables "All", has data over 5 minutes of scrapes of a flow that copies (not ``full``)."""
    queries = dashboard_exprs()
    queries += [("variable", LABEL_VALUES.sub(r"\1", query)) for query in variable_queries()]
    names = {f"DashboardQuery{i}": (title, expr) for i, (title, expr) in enumerate(queries)}
    rules = [{"alert": name, "expr": f"count({substituted(expr)}) > 0"} for name, (_, expr) in names.items()]
    (tmp_path / "queries.yaml").write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    expected = [{"eval_time": "5m", "alertname": name, "exp_alerts": [{"exp_labels": {}}]} for name in names]
    tests = {
        "rule_files": ["queries.yaml"],
        "evaluation_interval": "15s",
        "tests": [
            {"interval": "15s", "input_series": series_of(populated_snapshot(full=False)), "alert_rule_test": expected}
        ],
    }
    (tmp_path / "queries.test.yaml").write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        [promtool(), "test", "rules", str(tmp_path / "queries.test.yaml")],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    empty = [
        f"{title}: {expr}"
        for name, (title, expr) in names.items()
        if f"alertname: {name}," in done.stdout + done.stderr
    ]
    assert done.returncode == 0, "queries without data:\n" + "\n".join(empty) + f"\n{done.stdout}\n{done.stderr}"


def test_the_metric_names_and_labels_are_the_exporters() -> None:
    names = exported()
    used = [(f"dashboard {title}", expr) for title, expr in dashboard_exprs()]
    used += [("dashboard variable", query) for query in variable_queries()]
    used += [(f"alert {alert}", expr) for alert, expr in rule_exprs().items()]
    for where, expr in used:
        for name in METRIC.findall(expr):
            assert name in names, f"{where}: {name} is not a metric of srm/service/exposition.py"
        for name, matchers in SELECTOR.findall(expr):
            labels = names.get(name)
            for label, _, _ in MATCHER.findall(matchers):
                assert labels is None or label in labels, f"{where}: {name} has no label {label} ({sorted(labels)})"
