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

from srm.devenv.compose import GENERATED, read_env, secret_problems, write_env
from tests.compose.stack import COMPOSE_FILE, ENV_EXAMPLE, OFFLINE_FILE, ROOT, compose, run
from tests.unit.test_alert_rules import promtool

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
    "prometheus",
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
    # the admin's password and the scrape token reach the init service only (it writes the token's file)
    for secret in ("AIRFLOW_ADMIN_PASSWORD", "SRM_PROMETHEUS_TOKEN"):
        assert [n for n, s in services.items() if secret in (s.get("environment") or {})] == ["airflow-init"]


def volumes(service: dict[str, Any]) -> dict[str, tuple[str, bool]]:
    """A service's mounts by target: (source, read only), from the short or the long syntax."""
    found = {}
    for volume in service["volumes"]:
        if isinstance(volume, str):
            source, target, *mode = volume.split(":")
            found[target] = (source, mode == ["ro"])
        else:
            found[volume["target"]] = (volume["source"], bool(volume.get("read_only")))
    return found


def test_prometheus_scrapes_the_monitoring_service_with_the_token_the_flows_name(tmp_path: Path) -> None:
    """The stack's Prometheus config is valid (promtool), its rule file and token are mounted where it
    reads them, and the flows' YAML names the same token file for the API server."""
    services = config(COMPOSE_FILE)["services"]
    mounts = volumes(services["prometheus"])
    settings = yaml.safe_load((ROOT / "conf" / "compose" / "prometheus.yml").read_text())
    (job,) = settings["scrape_configs"]
    assert job["metrics_path"] == "/srm/metrics"
    assert job["static_configs"] == [{"targets": ["airflow-apiserver:8080"]}]
    token = Path(job["authorization"]["credentials_file"])
    assert mounts[str(token.parent)] == ("srm-secrets", True)
    assert volumes(services["airflow-apiserver"])[str(token.parent)][0] == "srm-secrets"
    flows = yaml.safe_load((ROOT / "conf" / "compose" / "flows" / "srm.yaml").read_text())
    assert flows["monitoring"]["prometheus.token.file"] == str(token)
    assert str(token) in (ROOT / "conf" / "compose" / "airflow-init.sh").read_text()
    # promtool on the config, the mounted repo files in place of the container's paths
    local = {target: source for target, (source, _) in mounts.items() if source.startswith("/")}
    for source in local.values():
        assert Path(source).is_file(), f"prometheus mounts {source}, which does not exist"
    assert local["/etc/prometheus/prometheus.yml"] == str(ROOT / "conf" / "compose" / "prometheus.yml")
    assert settings["rule_files"] == ["/etc/prometheus/rules/srm-alerts.yaml"]
    assert local["/etc/prometheus/rules/srm-alerts.yaml"] == str(ROOT / "conf" / "prometheus" / "srm-alerts.yaml")
    (tmp_path / "token").write_text("t\n")
    settings["rule_files"] = [local["/etc/prometheus/rules/srm-alerts.yaml"]]
    job["authorization"]["credentials_file"] = str(tmp_path / "token")
    checked = tmp_path / "prometheus.yml"
    checked.write_text(yaml.safe_dump(settings))
    done = subprocess.run([promtool(), "check", "config", str(checked)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_offline_override_runs_kafka_and_postgres_from_images_built_here() -> None:
    services = config(COMPOSE_FILE, OFFLINE_FILE)["services"]
    assert services["postgres"]["image"] == "srm-services:local"
    assert services["prometheus"]["image"] == "srm-services:local"
    assert services["prometheus"]["entrypoint"][-1] == "/usr/bin/prometheus"
    assert services["prometheus"]["command"][0] == "--config.file=/etc/prometheus/prometheus.yml"
    for side in ("kafka-west", "kafka-east"):
        assert services[side]["image"] == "srm:latest"
        assert services[side]["command"] == ["python", "-m", "srm.devenv.container", "kafka"]
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
