"""Airflow for the DAG tests: one AIRFLOW_HOME (SQLite) per test session, migrated once.

Every test gets a LocalAirflow bound to its own srm.yaml (SRM_CONFIG), so ``airflow dags test``
parses only that test's flows, under that test's cluster aliases.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from srm.devenv.airflow import LocalAirflow
from srm.paths import project_root


@pytest.fixture(scope="session")
def airflow_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("airflow")
    LocalAirflow(home, project_root() / "conf" / "srm.yaml").migrate()
    return home


@pytest.fixture
def airflow(airflow_home: Path) -> Callable[[Path], LocalAirflow]:
    """``airflow(config_path)``: the test session's Airflow, with the DAGs of that config."""
    return lambda config: LocalAirflow(airflow_home, config)


def probe(home: Path, config: Path, *, connections: bool = True) -> dict[str, Any]:
    """Parse the DAG folder in a fresh interpreter, as Airflow's DAG processor does (see srm.airflow.probe)."""
    env = LocalAirflow(home, config).env()
    if not connections:
        env = {k: v for k, v in env.items() if not k.startswith("AIRFLOW_CONN_")}
    result = subprocess.run(
        [sys.executable, "-m", "srm.airflow.probe"],
        check=False,
        env=env,
        cwd=project_root(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    found["log"] = result.stdout + result.stderr
    return found


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "headless Chromium is missing: make test installs it (make browser)"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1440,1750"):
        options.add_argument(argument)
    session = webdriver.Chrome(service=Service(driver, log_output=str(tmp_path / "chromedriver.log")), options=options)
    try:
        yield session
    finally:
        session.switch_to.default_content()  # for a failing test's reader: what the browser showed
        session.save_screenshot(str(tmp_path / "last-page.png"))
        (tmp_path / "last-page.html").write_text(session.page_source)
        session.quit()
