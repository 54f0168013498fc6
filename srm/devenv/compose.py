"""The docker-compose stack (docker-compose.yaml) from ``make compose-up``: its .env, and waiting for it.

``python -m srm.devenv.compose env`` writes ``.env`` from ``.env.example`` with fresh random secrets
when there is none (an existing one is never touched). ``python -m srm.devenv.compose check
[--env-file F]`` refuses secrets that protect nothing: missing, the example's placeholders, too short,
a Fernet key that is none (``make compose-up`` and the stack's init run it).
``python -m srm.devenv.compose wait -- <compose command>`` waits until every service of the stack is
healthy (one-shot services: exited 0), showing which are not yet, then prints the UI's address and
the login; a service that fails or stays unhealthy is named with the end of its log.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from srm.paths import project_root

ONE_SHOT = {"airflow-init"}
GENERATED = {
    "POSTGRES_PASSWORD": lambda: secrets.token_urlsafe(24),
    "AIRFLOW_ADMIN_PASSWORD": lambda: secrets.token_urlsafe(12),
    "AIRFLOW_FERNET_KEY": lambda: base64.urlsafe_b64encode(secrets.token_bytes(32)).decode(),
    "AIRFLOW_SECRET_KEY": lambda: secrets.token_urlsafe(64),  # signs JWTs with HS512: 64 bytes at least
    "SRM_PROMETHEUS_TOKEN": lambda: secrets.token_urlsafe(32),
}


def write_env(example: Path, env: Path) -> bool:
    """``env`` from ``example`` with every secret generated; False when ``env`` exists."""
    if env.exists():
        return False
    lines = []
    for line in example.read_text().splitlines():
        name = line.split("=", 1)[0]
        lines.append(f"{name}={GENERATED[name]()}" if name in GENERATED and "=" in line else line)
    env.touch(mode=0o600)
    env.write_text("\n".join(lines) + "\n")
    return True


PLACEHOLDER = "change-me"
MIN_LENGTH = {
    "POSTGRES_PASSWORD": 12,
    "AIRFLOW_ADMIN_PASSWORD": 12,
    "AIRFLOW_SECRET_KEY": 64,
    "SRM_PROMETHEUS_TOKEN": 32,
}


def secret_problems(env: Mapping[str, str]) -> list[str]:
    """What is wrong with the stack's secrets in ``env`` (names only, never values)."""
    problems = []
    for name in GENERATED:
        value = env.get(name, "")
        if not value:
            problems.append(f"{name} is not set")
        elif value == PLACEHOLDER:
            problems.append(f"{name} is still the placeholder of .env.example")
        elif len(value) < MIN_LENGTH.get(name, 0):
            problems.append(f"{name} has {len(value)} characters, fewer than {MIN_LENGTH[name]}")
        elif name == "AIRFLOW_FERNET_KEY" and not all(_fernet_key(k) for k in value.split(",")):
            problems.append(f"{name} is not a Fernet key (32 url-safe base64-encoded bytes; NEW,OLD to rotate)")
    return problems


def _fernet_key(key: str) -> bool:
    try:
        return len(base64.urlsafe_b64decode(key.strip().encode())) == 32
    except ValueError:
        return False


def read_env(env: Path) -> dict[str, str]:
    found = {}
    for line in env.read_text().splitlines():
        match = re.match(r"^([A-Z_][A-Z0-9_]*)=(.*)$", line.strip())
        if match:
            found[match.group(1)] = match.group(2)
    return found


@dataclass(frozen=True)
class ServiceState:
    service: str
    status: str  # running, exited, ...
    health: str  # healthy, starting, unhealthy, or "" without a health check
    exit_code: int

    @property
    def ready(self) -> bool:
        if self.service in ONE_SHOT:
            return self.status == "exited" and self.exit_code == 0
        return self.status == "running" and self.health in ("healthy", "")

    @property
    def failed(self) -> bool:
        if self.service in ONE_SHOT:
            return self.status == "exited" and self.exit_code != 0
        return self.status in ("exited", "dead", "restarting") or self.health == "unhealthy"

    def __str__(self) -> str:
        detail = self.health or self.status
        if self.status == "exited":
            detail = f"exited {self.exit_code}"
        return f"{self.service}: {detail}"


def states(compose: list[str]) -> list[ServiceState]:
    ids = subprocess.run([*compose, "ps", "-a", "-q"], capture_output=True, text=True, check=True).stdout.split()
    if not ids:
        return []
    template = "{{json .}}"
    out = subprocess.run(["docker", "inspect", "--format", template, *ids], capture_output=True, text=True, check=True)
    found = []
    for line in out.stdout.splitlines():
        info = json.loads(line)
        state = info["State"]
        service = info["Config"]["Labels"].get("com.docker.compose.service", info["Name"].lstrip("/"))
        health = (state.get("Health") or {}).get("Status", "")
        found.append(ServiceState(service, state["Status"], health, int(state.get("ExitCode", 0))))
    return sorted(found, key=lambda s: s.service)


def wait(compose: list[str], timeout: float) -> list[ServiceState]:
    """Until every service is ready; raises TimeoutError/RuntimeError naming the ones that are not."""
    deadline, started, last = time.monotonic() + timeout, time.monotonic(), ""
    while True:
        now = states(compose)
        failed = [s for s in now if s.failed]
        if failed:
            raise RuntimeError(_report(compose, failed, "failed"))
        pending = [s for s in now if not s.ready]
        if now and not pending:
            return now
        line = f"[{time.monotonic() - started:4.0f}s] waiting for " + ", ".join(map(str, pending)) if now else ""
        if line != last:
            print(line, flush=True)
            last = line
        if time.monotonic() > deadline:
            raise TimeoutError(_report(compose, pending, f"not ready after {timeout:.0f} s"))
        time.sleep(3)


def _report(compose: list[str], services: list[ServiceState], what: str) -> str:
    parts = [f"{what}: " + ", ".join(map(str, services))]
    for state in services:
        logs = subprocess.run(
            [*compose, "logs", "--no-color", "--tail", "25", state.service], capture_output=True, text=True, check=False
        )
        parts.append(f"--- {state.service} (last lines) ---\n{logs.stdout.rstrip()}")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m srm.devenv.compose", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("env", help="write .env with fresh secrets from .env.example unless it exists")
    check = sub.add_parser("check", help="refuse missing, placeholder, short or malformed secrets")
    check.add_argument("--env-file", type=Path, help="the .env to check (default: this process's environment)")
    waiting = sub.add_parser("wait", help="wait until the stack is healthy, then print the UI and the login")
    waiting.add_argument("--timeout", type=float, default=900)
    waiting.add_argument("compose", nargs="+", help="the compose command: -- docker-compose -f docker-compose.yaml")
    args = parser.parse_args(argv)
    root = project_root()
    if args.command == "env":
        written = write_env(root / ".env.example", root / ".env")
        print(".env written with fresh secrets (mode 600)" if written else ".env exists: kept as it is")
        return 0
    if args.command == "check":
        where = str(args.env_file) if args.env_file else "the environment (from .env)"
        problems = secret_problems(read_env(args.env_file) if args.env_file else dict(os.environ))
        for problem in problems:
            print(f"error: {where}: {problem}", file=sys.stderr)
        if problems:
            print("fix them in .env (make compose-up writes fresh ones when there is no .env)", file=sys.stderr)
        return 1 if problems else 0
    try:
        ready = wait(args.compose, args.timeout)
    except (TimeoutError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    env_file = (
        Path(args.compose[args.compose.index("--env-file") + 1]) if "--env-file" in args.compose else root / ".env"
    )
    env = read_env(env_file) if env_file.exists() else {}
    bind, port = env.get("AIRFLOW_UI_BIND", "127.0.0.1"), env.get("AIRFLOW_UI_PORT", "8080")
    host = "127.0.0.1" if bind in ("0.0.0.0", "") else bind
    print(f"{len(ready)} services ready: " + ", ".join(s.service for s in ready))
    print(f"Airflow UI: http://{host}:{port}  (Replications page: http://{host}:{port}/srm/ui/)")
    print(f"login: {env.get('AIRFLOW_ADMIN_USER', 'admin')}, password: AIRFLOW_ADMIN_PASSWORD in .env")
    prometheus = env.get("PROMETHEUS_PORT", "9090")
    print(f"Prometheus (scraping the monitoring service, with the alert rules): http://127.0.0.1:{prometheus}")
    print(f"the stack's commands: {shlex.join(args.compose)} exec airflow-scheduler srm-control status")
    return 0


if __name__ == "__main__":
    sys.exit(main())
