"""Airflow's API server for the tests of the REST API and the Replications page: a real login
(the simple auth manager with users, not all-admins), started once per test and stopped after."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from srm.devenv.airflow import LocalAirflow
from tests.conftest import free_ports

START_TIMEOUT_S = 180
WAIT_S = 60  # the browser waits this long for what the page should show
USER = "ops"
PASSWORD = "ops-password"


class ApiServer:
    def __init__(self, airflow: LocalAirflow, folder: Path) -> None:
        self.airflow = airflow
        self.port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}"
        passwords = folder / "passwords.json"
        passwords.write_text(json.dumps({USER: PASSWORD}))
        env = {
            **airflow.env(),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:viewer",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        }
        command = [str(Path(sys.executable).parent / "airflow"), "api-server", "--port", str(self.port)]
        command += ["--host", "127.0.0.1", "--workers", "1"]
        self.log = folder / "api-server.log"
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.log.read_text()[-3000:]
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5):
                    return
            except OSError:
                time.sleep(1)
        raise AssertionError(f"the API server did not answer in {START_TIMEOUT_S} s:\n{self.log.read_text()[-3000:]}")

    def token(self, user: str, password: str) -> str:
        body = json.dumps({"username": user, "password": password}).encode()
        request = urllib.request.Request(
            f"{self.url}/auth/token", body, {"Content-Type": "application/json"}, method="POST"
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return str(json.loads(response.read())["access_token"])

    def get(self, path: str, token: str | None = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(self.url + path, headers=headers), timeout=60) as r:
                return r.status, json.loads(r.read()) if "json" in r.headers.get("Content-Type", "") else r.read()
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)


def log_in(browser: Any, api: ApiServer) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{api.url}/plugin/replications")
    wait = WebDriverWait(browser, WAIT_S)
    wait.until(ec.presence_of_element_located((By.CSS_SELECTOR, "input[name=username]"))).send_keys(USER)
    browser.find_element(By.CSS_SELECTOR, "input[name=password]").send_keys(PASSWORD)
    browser.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait.until(lambda b: "/auth/login" not in b.current_url)
    if "/plugin/replications" not in browser.current_url:
        browser.get(f"{api.url}/plugin/replications")


def open_page(browser: Any) -> None:
    """Into the page's frame inside Airflow's UI, once its first refresh has finished."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)
    wait.until(ec.frame_to_be_available_and_switch_to_it((By.CSS_SELECTOR, "iframe[src*='/srm/ui/']")))
    wait.until(lambda b: int(b.find_element(By.TAG_NAME, "body").get_attribute("data-refreshes") or 0) >= 1)
