"""The compose command of this machine (``docker compose`` or ``docker-compose``), and a stack of
docker-compose.yaml under a project name and ports of its own, on the images built here
(conf/compose/offline.yaml)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from srm.devenv.compose import read_env, wait, write_env
from srm.devenv.demo import DEMO_PARTITIONS, DEMO_RECORDS, DEMO_TOPIC
from srm.devenv.local import port_in_use
from srm.paths import project_root

ROOT = project_root()
COMPOSE_FILE = ROOT / "docker-compose.yaml"
OFFLINE_FILE = ROOT / "conf" / "compose" / "offline.yaml"
ENV_EXAMPLE = ROOT / ".env.example"


def compose_binary() -> list[str]:
    """``docker compose`` when the plugin is there, else ``docker-compose``; fails naming the fix."""
    plugin = (
        subprocess.run(["docker", "compose", "version"], check=False, capture_output=True)
        if shutil.which("docker")
        else None
    )
    if plugin is not None and plugin.returncode == 0:
        return ["docker", "compose"]
    found = shutil.which("docker-compose")
    assert found, "neither `docker compose` nor `docker-compose` is installed: run `make compose-cli`"
    return [found]


def compose(project: str, env_file: Path, *files: Path) -> list[str]:
    command = [*compose_binary(), "-p", project, "--env-file", str(env_file)]
    for file in files or (COMPOSE_FILE,):
        command += ["-f", str(file)]
    return command


def run(command: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False, cwd=ROOT)


def describe(command: list[str]) -> str:
    return shlex.join(command)


# Where each published port's search starts: below the kernel's ephemeral range (32768-60999 by
# default), where a client's outgoing connection can hold a port at the moment docker binds it.
PORT_BASES = {
    "AIRFLOW_UI_PORT": 18080,
    "SPARK_UI_PORT": 18180,
    "KAFKA_WEST_PORT": 19192,
    "KAFKA_EAST_PORT": 19292,
    "PROMETHEUS_PORT": 19390,
}
FLOW = "us-west_to_us-east"
REMOTE = f"us-west.{DEMO_TOPIC}"
STARTED = time.monotonic()


def ephemeral_ports() -> range:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return range(int(low), int(high) + 1)


def free_ports() -> dict[str, int]:
    """A port for each of PORT_BASES: the first one from its base that nothing is bound to and that
    is outside the ephemeral range."""
    ephemeral, chosen = ephemeral_ports(), dict[str, int]()
    for name, base in PORT_BASES.items():
        candidates = (p for p in range(base, base + 100) if p not in ephemeral and p not in chosen.values())
        port = next((p for p in candidates if not port_in_use("127.0.0.1", p)), None)
        assert port is not None, f"{name}: ports {base}-{base + 99} on 127.0.0.1 are all in use"
        chosen[name] = port
    return chosen


def say(message: str) -> None:
    print(f"[compose {time.monotonic() - STARTED:6.0f}s] {message}", flush=True)


class Stack:
    def __init__(self, folder: Path, project: str, executor: str = "LocalExecutor") -> None:
        self.project = project
        self.env_file = folder / ".env"
        write_env(ENV_EXAMPLE, self.env_file)
        flows = folder / "flows"
        flows.mkdir()
        self.yaml = flows / "srm.yaml"
        self.yaml.write_text((ROOT / "conf" / "compose" / "flows" / "srm.yaml").read_text())
        self.ports = free_ports()
        with open(self.env_file, "a") as env:
            env.write(f"SRM_FLOWS_DIR={flows}\n")
            env.writelines(f"{k}={v}\n" for k, v in self.ports.items())
            env.write(f"AIRFLOW_EXECUTOR={executor}\n")
        self.env = read_env(self.env_file)
        self.command = compose(project, self.env_file, COMPOSE_FILE, OFFLINE_FILE)
        if executor == "CeleryExecutor":
            self.command += ["--profile", "celery"]
        self.url = f"http://127.0.0.1:{self.ports['AIRFLOW_UI_PORT']}"
        self._token: str | None = None

    def compose(self, *args: str, timeout: float = 600) -> str:
        result = run([*self.command, *args], timeout=timeout)
        assert result.returncode == 0, f"{describe([*self.command, *args])}:\n{result.stdout}{result.stderr}"
        return result.stdout

    def exec(self, service: str, *args: str, timeout: float = 300) -> str:
        return self.compose("exec", "-T", service, *args, timeout=timeout)

    def request(self, method: str, path: str, body: Any = None, token: str | None = "login") -> tuple[int, Any]:
        headers = {"Content-Type": "application/json"}
        if token == "login":
            token = self.token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data, headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode(errors="replace")

    def token(self) -> str:
        if self._token is None:
            user, password = self.env["AIRFLOW_ADMIN_USER"], self.env["AIRFLOW_ADMIN_PASSWORD"]
            status, answer = self.request("POST", "/auth/token", {"username": user, "password": password}, None)
            assert status in (200, 201), (status, answer)
            self._token = str(answer["access_token"])
        return self._token

    def leftovers(self) -> list[str]:
        label = f"label=com.docker.compose.project={self.project}"
        found = []
        for kind in (["ps", "-a", "-q"], ["volume", "ls", "-q"], ["network", "ls", "-q"]):
            out = subprocess.run(["docker", *kind, "--filter", label], capture_output=True, text=True, check=True)
            found += out.stdout.split()
        return found


@contextmanager
def running(folder: Path, project: str, executor: str = "LocalExecutor") -> Iterator[Stack]:
    """The stack up and healthy; down after, checking nothing is left (SRM_COMPOSE_KEEP=1 keeps it)."""
    up = Stack(folder, project, executor)
    up.compose("down", "-v", "--remove-orphans")  # a stack an interrupted run left
    say(f"up ({executor}): {describe(up.command)} up -d")
    try:
        up.compose("up", "-d", timeout=900)
        ready = wait(up.command, 900)
        say(f"{len(ready)} services ready: " + ", ".join(s.service for s in ready))
        yield up
    finally:
        if os.environ.get("SRM_COMPOSE_KEEP"):
            say("SRM_COMPOSE_KEEP set: the stack stays up")
        else:
            down(up)


def down(up: Stack) -> None:
    logs = run([*up.command, "logs", "--no-color", "--tail", "40"], timeout=120).stdout
    (ROOT / ".local").mkdir(exist_ok=True)
    (ROOT / ".local" / f"{up.project}-services.log").write_text(logs)
    up.compose("down", "-v", "--remove-orphans", timeout=300)
    left = up.leftovers()
    say(f"down: {len(left)} containers, volumes or networks left")
    assert not left, f"left running or stored after down: {left}"


def wait_for(what: str, check: Any, timeout: float, every: float = 5) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"{what}: not after {timeout:.0f} s"
        time.sleep(every)


def dag_parsed(stack: Stack, dag_id: str) -> bool:
    return stack.request("GET", f"/api/v2/dags/{dag_id}")[0] == 200


def replicate_demo(stack: Stack) -> None:
    """Demo records on us-west, the flow's maintenance and replicate DAGs unpaused (the scheduler runs
    them; replicate is @continuous): every record on us-east exactly once, in order, byte for byte."""
    produced = stack.exec(
        "airflow-scheduler",
        "python",
        "-c",
        "from srm.config import load_config; from srm.devenv.demo import produce_demo_data; "
        "print(produce_demo_data(load_config().cluster('us-west')))",
    )
    assert produced.strip().splitlines()[-1] == str(DEMO_RECORDS)
    say(f"{DEMO_RECORDS} records produced to {DEMO_TOPIC} on us-west (inside the stack)")
    for job in ("maintenance", "replicate"):
        wait_for(f"DAG {FLOW}.{job} parsed", lambda job=job: dag_parsed(stack, f"{FLOW}.{job}"), 300)
    started = time.monotonic()
    for job in ("maintenance", "replicate"):  # unpaused: the scheduler starts them (replicate: @continuous)
        status, answer = stack.request("PATCH", f"/api/v2/dags/{FLOW}.{job}", {"is_paused": False})
        assert status == 200, answer
    say("maintenance and replicate DAGs unpaused; the scheduler runs them on the stack's Spark cluster")

    bootstrap = f"127.0.0.1:{stack.ports['KAFKA_EAST_PORT']}"

    def copied() -> list[Any] | None:
        records = read_all(bootstrap, REMOTE)
        return records if records is not None and len(records) >= DEMO_RECORDS else None

    def progress() -> list[Any] | None:
        found = copied()
        if found is None:
            runs = stack.request("GET", f"/api/v2/dags/{FLOW}.replicate/dagRuns?limit=5")[1]
            for run in runs.get("dag_runs", []) if isinstance(runs, dict) else []:
                assert run["state"] != "failed", f"the replicate run failed: {run}"
        return found

    records = wait_for(f"{DEMO_RECORDS} records of {REMOTE} on us-east", progress, 900, every=10)
    say(f"{len(records)} records on us-east after {time.monotonic() - started:.0f} s")
    source = read_all(f"127.0.0.1:{stack.ports['KAFKA_WEST_PORT']}", DEMO_TOPIC)
    assert source is not None and len(source) == DEMO_RECORDS
    time.sleep(10)  # nothing more arrives: exactly once
    records = read_all(bootstrap, REMOTE)
    assert records is not None
    assert len(records) == DEMO_RECORDS
    for partition in range(DEMO_PARTITIONS):  # in order, byte for byte, headers and timestamps kept
        assert [r for r in records if r[0] == partition] == [r for r in source if r[0] == partition]


def read_all(bootstrap: str, topic: str) -> list[tuple[Any, ...]] | None:
    """Every committed record of ``topic``: (partition, key, value, headers, timestamp), or None if the
    topic does not exist."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "srm-compose-test",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return None
        partitions = [TopicPartition(topic, p, 0) for p in metadata.partitions]
        ends = {p.partition: consumer.get_watermark_offsets(p, timeout=10)[1] for p in partitions}
        consumer.assign([TopicPartition(topic, p, 0) for p, end in ends.items() if end > 0])
        done: set[int] = {p for p, end in ends.items() if end == 0}
        out: list[tuple[Any, ...]] = []
        deadline = time.monotonic() + 60
        while len(done) < len(ends) and time.monotonic() < deadline:
            message = consumer.poll(1)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    done.add(int(message.partition() or 0))
                continue
            out.append((message.partition(), message.key(), message.value(), message.headers(), message.timestamp()))
        return out
    finally:
        consumer.close()
