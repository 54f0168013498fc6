"""docker-compose.yaml is valid as the compose command reads it, and a broken edit is refused.
Runs in ``make test`` (no daemon needed: ``config`` only reads the files)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from srm.compose import GENERATED, read_env, secret_problems, write_env
from tests.compose.stack import COMPOSE_FILE, ENV_EXAMPLE, OFFLINE_FILE, ROOT, compose, run

LONG_RUNNING = {
    "postgres",
    "airflow-apiserver",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "spark-master",
    "spark-worker-1",
    "spark-worker-2",
    "kafka-west",
    "kafka-east",
}


def config(*files: Path, env_file: Path = ENV_EXAMPLE, profile: str | None = None) -> dict[str, Any]:
    command = compose("srm-config-test", env_file, *files)
    if profile:
        command += ["--profile", profile]
    result = run([*command, "config"])
    assert result.returncode == 0, result.stderr
    return dict(yaml.safe_load(result.stdout))


def test_the_compose_file_is_valid_with_every_service_healthchecked() -> None:
    services = config(COMPOSE_FILE)["services"]
    assert LONG_RUNNING | {"airflow-init"} <= set(services)
    for name in LONG_RUNNING:
        assert services[name].get("healthcheck", {}).get("test"), f"{name} has no health check"
    airflow = [s for n, s in services.items() if n.startswith("airflow-")]
    assert {s["image"] for s in airflow} == {"srm:latest"}
    assert services["kafka-west"]["image"].startswith("apache/kafka:")
    env = services["airflow-apiserver"]["environment"]
    assert env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
    assert env["AIRFLOW__CORE__AUTH_MANAGER"].endswith("FabAuthManager")  # users log in: not all-admins
    assert "SIMPLE_AUTH_MANAGER_ALL_ADMINS" not in str(services)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"].startswith("postgresql+psycopg2://airflow:")
    mounts = [str(v) for v in services["airflow-dag-processor"]["volumes"]]
    assert any("/opt/srm/conf/flows" in m and "conf/compose/flows" in m for m in mounts), mounts  # a folder
    assert env["SRM_CONFIG"] == "/opt/srm/conf/flows/srm.yaml"
    # the admin's password reaches the init service only
    assert [n for n, s in services.items() if "AIRFLOW_ADMIN_PASSWORD" in (s.get("environment") or {})] == [
        "airflow-init"
    ]


def test_the_offline_override_runs_kafka_and_postgres_from_images_built_here() -> None:
    services = config(COMPOSE_FILE, OFFLINE_FILE)["services"]
    assert services["postgres"]["image"] == "srm-services:local"
    for side in ("kafka-west", "kafka-east"):
        assert services[side]["image"] == "srm:latest"
        assert services[side]["command"] == ["python", "-m", "srm.container", "kafka"]
        assert "kafka-ready" in services[side]["healthcheck"]["test"]


def test_the_celery_profile_adds_redis_and_a_worker() -> None:
    services = config(COMPOSE_FILE, profile="celery")["services"]
    assert {"redis", "airflow-worker"} <= set(services)
    assert services["airflow-worker"]["command"] == ["airflow", "celery", "worker"]


def test_secrets_come_from_the_env_file_and_are_required(tmp_path: Path) -> None:
    text = COMPOSE_FILE.read_text()
    for name in GENERATED:
        assert f"${{{name}" in text  # a variable, never a value
    empty = tmp_path / "empty.env"
    empty.write_text("")
    result = run([*compose("srm-config-test", empty), "config"])
    assert result.returncode != 0
    assert "POSTGRES_PASSWORD" in result.stderr or "AIRFLOW_" in result.stderr, result.stderr
    ignored = subprocess.run(["git", "check-ignore", "-q", ".env"], cwd=ROOT, check=False)
    assert ignored.returncode == 0, ".env must be git-ignored"


BROKEN_EDITS = {
    "a dependency on a service that does not exist": (
        '    depends_on:\n      postgres:\n        condition: service_healthy\n    restart: "no"',
        '    depends_on:\n      postgress:\n        condition: service_healthy\n    restart: "no"',
        "postgress",
    ),
    "a misspelt key": ("    healthcheck: *airflow-job", "    helthcheck: *airflow-job", "helthcheck"),
    "broken indentation": ("  spark-master:\n", "  spark-master:\n   bad: [\n", "while parsing"),
}


@pytest.mark.parametrize("edit", BROKEN_EDITS, ids=list(BROKEN_EDITS))
def test_a_broken_edit_fails(edit: str, tmp_path: Path) -> None:
    old, new, named = BROKEN_EDITS[edit]
    text = COMPOSE_FILE.read_text()
    assert old in text, f"the edit's anchor text is gone from docker-compose.yaml: {old!r}"
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(text.replace(old, new, 1))
    result = run([*compose("srm-config-test", ENV_EXAMPLE, broken), "config"])
    assert result.returncode != 0, f"{edit} was accepted"
    assert named in result.stderr, result.stderr


def test_env_is_written_once_with_fresh_secrets(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    assert write_env(ENV_EXAMPLE, env)
    values = read_env(env)
    example = read_env(ENV_EXAMPLE)
    for name in GENERATED:
        assert values[name] != example[name] and len(values[name]) >= 16, name
    assert stat.S_IMODE(os.stat(env).st_mode) == 0o600
    before = env.read_text()
    assert not write_env(ENV_EXAMPLE, env)
    assert env.read_text() == before
    # the stack accepts the file
    assert (
        config(COMPOSE_FILE, env_file=env)["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"]
        == (values["POSTGRES_PASSWORD"])
    )


def test_placeholder_short_or_malformed_secrets_are_refused_by_name(tmp_path: Path) -> None:
    problems = secret_problems(read_env(ENV_EXAMPLE))
    assert problems == [f"{name} is still the placeholder of .env.example" for name in GENERATED]
    env = tmp_path / ".env"
    write_env(ENV_EXAMPLE, env)
    fresh = read_env(env)
    assert secret_problems(fresh) == []
    old_key = read_env(env)["AIRFLOW_FERNET_KEY"]
    write_env(ENV_EXAMPLE, other := tmp_path / "other.env")
    rotating = {**fresh, "AIRFLOW_FERNET_KEY": f"{read_env(other)['AIRFLOW_FERNET_KEY']},{old_key}"}
    assert secret_problems(rotating) == []  # NEW,OLD while rotating
    broken = {**fresh, "AIRFLOW_SECRET_KEY": "x" * 40, "AIRFLOW_FERNET_KEY": "not-a-key", "POSTGRES_PASSWORD": ""}
    assert secret_problems(broken) == [
        "POSTGRES_PASSWORD is not set",
        "AIRFLOW_FERNET_KEY is not a Fernet key (32 url-safe base64-encoded bytes; NEW,OLD to rotate)",
        "AIRFLOW_SECRET_KEY has 40 characters, fewer than 64",
    ]
    assert not any(fresh["AIRFLOW_ADMIN_PASSWORD"] in p for p in secret_problems({**fresh, "AIRFLOW_SECRET_KEY": ""}))
