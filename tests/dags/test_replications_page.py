"""The Replications page in the Airflow UI, driven by headless Chromium as an on-call engineer uses it:
log in to Airflow, open Replications in the navigation, read each flow's health from the picture and
the table, pick a flow, read its charts, its topics and its last error with the link to the task log.

Two flows: us-west->us-east copied records, heartbeats and a checkpoint (running); us-east->us-west's replicate
DAG failed in Airflow (failed, with the error and the log link its failure callback recorded).
``SRM_SCREENSHOT=path`` also saves the page there (docs/replications-page.png comes from it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.devenv.airflow import LocalAirflow
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.maintenance.heartbeats import emit
from srm.offsets.checkpointing import CheckpointPass
from tests.airflow_api import PASSWORD, USER, WAIT_S, ApiServer, log_in, open_page
from tests.checkpointing import commit
from tests.helpers import produce, srm_control
from tests.replication import Env, make_env, replicate, sequenced

pytestmark = pytest.mark.integration


@pytest.fixture
def flows(
    kafka: SrmConfig, spark: Any, tmp_path: Path, unique: Callable[[str], str], airflow_home: Path
) -> Iterator[tuple[Env, str, ApiServer]]:
    topic, connection = unique("page-orders"), unique("no_such_spark").replace("-", "_")
    env = make_env(
        kafka,
        tmp_path,
        [
            {"source": "west", "target": "east", "topics": [topic]},
            {"source": "east", "target": "west", "topics": [], "spark.connection_id": connection},
        ],
        aliases=("us-west", "us-east"),  # as a user names them; no other test of the session does
    )
    api = ApiServer(LocalAirflow(airflow_home, env.path), tmp_path)
    try:
        back = env.flow(env.east.alias, env.west.alias)
        run = LocalAirflow(airflow_home, env.path).dags_test(f"{back.source}_to_{back.target}.replicate", {})
        assert run.state == "failed", run.log[-3000:]
        ensure_topic(clients.admin_client(env.west), topic, 3)
        produce(env.west, topic, sequenced(3, 300))
        for flow in env.config.enabled_flows():
            emit(env.config, flow, 1)
        replicate(spark, env)
        commit(env.west, unique("page-readers"), {(topic, p): 50 for p in range(3)})
        CheckpointPass(env.config, env.flow()).run()
        # `airflow dags test` left the DAGs paused in Airflow's database, as a new deployment's are;
        # the operator unpauses the flows.
        for flow in env.config.enabled_flows():
            LocalAirflow(airflow_home, env.path).airflow("dags", "unpause", f"{flow.source}_to_{flow.target}.replicate")
        api.wait()
        yield env, topic, api
    finally:
        api.stop()


def health_shown(browser: Any, forward: Any, back: Any) -> dict[str, Any]:
    """The picture (one arrow per flow, coloured by its state) and the table of flows."""
    from selenium.webdriver.common.by import By

    arrows = {
        g.get_attribute("data-flow"): g.get_attribute("data-state")
        for g in browser.find_elements(By.CSS_SELECTOR, "#topology g[data-flow]")
    }
    assert arrows == {forward.name: "running", back.name: "failed"}
    clusters = {g.get_attribute("data-cluster") for g in browser.find_elements(By.CSS_SELECTOR, "#topology .cluster")}
    assert clusters == {forward.source, forward.target}
    colour = browser.find_element(By.CSS_SELECTOR, f"#topology g[data-flow='{back.name}'] path")
    assert colour.value_of_css_property("stroke") == "rgb(217, 72, 15)"  # --failed

    # The table of flows: state, reason, lag.
    rows = {r.get_attribute("data-flow"): r for r in browser.find_elements(By.CSS_SELECTOR, "#flows tbody tr")}
    assert set(rows) == {forward.name, back.name}
    cells = [c.text for c in rows[back.name].find_elements(By.TAG_NAME, "td")]
    assert cells[1] == "failed" and back.settings.spark_connection_id in cells[6], cells
    cells = [c.text for c in rows[forward.name].find_elements(By.TAG_NAME, "td")]
    assert cells[1] == "running" and cells[3] == "0" and cells[4].endswith("s ago"), cells
    return rows


def test_the_replications_page_shows_each_flows_health_charts_topics_and_last_error(
    flows: tuple[Env, str, ApiServer], browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    env, topic, api = flows
    forward, back = env.flow(), env.flow(env.east.alias, env.west.alias)
    assert forward.name == "us-west->us-east"
    assert api.get("/srm/ui/")[0] == 401  # the page, like the API, needs an Airflow login
    token = api.token(USER, PASSWORD)
    served = {r["flow"]: r for r in api.get("/srm/v2/replications", token)[1]["replications"]}
    shown = srm_control(env.path, "status", "--json")
    status = {f["flow"]: f for f in json.loads(shown.stdout)["flows"]}
    # The page's source and srm-control status tell the same facts.
    assert {n: (f["state"], f["last_error"]) for n, f in status.items()} == {
        n: (f["state"], f["last_error"]) for n, f in served.items()
    }
    assert served[forward.name]["state"] == "running" and served[back.name]["state"] == "failed", served

    log_in(browser, api)
    in_navigation = "a[aria-label='Replications'][href$='/plugin/replications']"
    WebDriverWait(browser, WAIT_S).until(lambda b: b.find_elements(By.CSS_SELECTOR, in_navigation))
    open_page(browser)
    assert browser.find_element(By.ID, "problem").get_attribute("hidden") is not None  # no error shown

    rows = health_shown(browser, forward, back)

    # The failed flow, shown first: its error and the link to its task log, opened in Airflow's UI.
    assert browser.find_element(By.ID, "detail-flow").text == back.name
    error = browser.find_element(By.ID, "detail-error")
    assert "replicate failed" in error.text and back.settings.spark_connection_id in error.text, error.text
    link = error.find_element(By.LINK_TEXT, "task log")
    assert link.get_attribute("href") == served[back.name]["last_error"]["log_url"]

    # The running flow: charts over time, its topic's row, heartbeat and checkpoint age.
    before = int(browser.find_element(By.TAG_NAME, "body").get_attribute("data-refreshes"))
    rows[forward.name].click()
    WebDriverWait(browser, WAIT_S).until(
        lambda b: (
            b.find_element(By.ID, "detail-flow").text == forward.name
            and b.find_elements(By.CSS_SELECTOR, f"#topics tr[data-topic='{topic}']")
        )
    )
    for chart in ("throughput", "latency", "lag", "checkpoint"):
        selector = f"#chart-{chart} canvas"
        WebDriverWait(browser, WAIT_S).until(lambda b, s=selector: b.find_elements(By.CSS_SELECTOR, s))
        assert int(browser.find_element(By.ID, f"chart-{chart}").get_attribute("data-points")) > 0, chart
    row = browser.find_element(By.CSS_SELECTOR, f"#topics tr[data-topic='{topic}']")
    cells = [c.text for c in row.find_elements(By.TAG_NAME, "td")]
    remote = forward.policy.format_remote_topic(forward.source, topic)
    assert cells[:4] == [topic, remote, "0", "300"], cells  # every record copied, none behind
    assert browser.find_element(By.ID, "detail-heartbeat").text.endswith("s ago")
    assert browser.find_element(By.ID, "detail-checkpoint").text.endswith("s ago")
    assert browser.find_element(By.ID, "detail-error").text == "none"

    # A refresh keeps the chosen flow; the whole page as a person sees it.
    browser.find_element(By.ID, "refresh").click()
    WebDriverWait(browser, WAIT_S).until(
        lambda b: int(b.find_element(By.TAG_NAME, "body").get_attribute("data-refreshes")) > before
    )
    assert browser.find_element(By.ID, "detail-flow").text == forward.name
    browser.switch_to.default_content()
    if os.environ.get("SRM_SCREENSHOT"):
        browser.save_screenshot(os.environ["SRM_SCREENSHOT"])

    task_log_opens(browser, back.name, served[back.name]["last_error"]["dag_id"])


def task_log_opens(browser: Any, flow: str, dag_id: str) -> None:
    """The failed flow's "task log" opens the failed task's log page in Airflow's UI around the page.
    (`airflow dags test` runs tasks in its own process and leaves no log file to show there.)"""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    open_page(browser)
    browser.find_element(By.CSS_SELECTOR, f"#flows tr[data-flow='{flow}']").click()
    WebDriverWait(browser, WAIT_S).until(lambda b: b.find_element(By.ID, "detail-flow").text == flow)
    browser.find_element(By.LINK_TEXT, "task log").click()
    browser.switch_to.default_content()
    WebDriverWait(browser, WAIT_S).until(lambda b: f"/dags/{dag_id}/runs/" in b.current_url)
    WebDriverWait(browser, WAIT_S).until(lambda b: "Failed" in b.find_element(By.TAG_NAME, "body").text)
    assert browser.find_elements(By.LINK_TEXT, dag_id) and "Logs" in browser.find_element(By.TAG_NAME, "body").text
