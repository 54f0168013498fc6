"""The package runs from an installed wheel, without the checkout: built with ``uv build``, installed
into a fresh virtual environment outside the checkout (with the pinned dependencies, from uv's cache),
``srm-control validate`` reads ``conf/srm.yaml`` of the working folder and
``srm-control run replicate --mode available-now`` copies a topic with the Spark job inside the
package (srm.jobs) and its Log4j2 configuration."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.paths import project_root
from tests.helpers import produce
from tests.replication import Env, count_records, make_env, sequenced

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent
PYSPARK = "pyspark==4.3.0"  # as make install pins it (the lock leaves pyspark out)


def run(command: list[str], cwd: Path, env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, check=False, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert done.returncode == 0, (
        f"{' '.join(command)}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    return done


def test_an_installed_wheel_validates_and_replicates_without_the_checkout(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("wheel")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 2)
    produce(env.west, topic, sequenced(2, 200))

    plain = {k: v for k, v in os.environ.items() if not k.startswith(("SRM_", "PYTHONPATH", "VIRTUAL_ENV"))}
    dist, venv = tmp_path / "dist", tmp_path / "venv"
    uv = str(BIN / "uv")
    run([uv, "build", "--wheel", "--out-dir", str(dist), str(project_root())], tmp_path, plain, 600)
    [wheel] = dist.glob("srm_airflow-*.whl")
    run([uv, "venv", "-q", str(venv), "--python", sys.executable], tmp_path, plain, 120)
    python = str(venv / "bin" / "python")
    lock = str(project_root() / "requirements.lock")
    run([uv, "pip", "install", "-q", "--python", python, "-r", lock], tmp_path, plain, 900)
    run([uv, "pip", "install", "-q", "--python", python, "--no-deps", PYSPARK, str(wheel)], tmp_path, plain, 300)
    try:
        replicate_from(venv, env, tmp_path, plain)
    finally:
        shutil.rmtree(venv, ignore_errors=True)  # 1.4 GB
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    assert count_records(env.east, remote) == 200


def replicate_from(venv: Path, env: Env, tmp_path: Path, plain: dict[str, str]) -> None:
    """``srm-control validate`` and an available-now run of ``env``'s flow with ``venv``'s package."""
    work = tmp_path / "work"  # outside the checkout: its conf/srm.yaml is the default configuration
    (work / "conf").mkdir(parents=True)
    shutil.copy(env.path, work / "conf" / "srm.yaml")
    installed = {**plain, "XDG_DATA_HOME": str(tmp_path / "data")}
    python = str(venv / "bin" / "python")
    where = run([python, "-c", "import srm.jobs.replicate as j; print(j.__file__)"], work, installed, 60)
    site = Path(where.stdout.strip()).parents[2]
    assert site.is_relative_to(venv), where.stdout  # the wheel's package, not the checkout's
    control = str(venv / "bin" / "srm-control")

    validated = run([control, "validate"], work, installed, 120)
    shown = validated.stdout
    assert shown.startswith(f"{work / 'conf' / 'srm.yaml'}: ") and env.flow().name in shown, shown
    assert "configuration is valid" in shown, shown

    flow = ["--source", env.west.alias, "--target", env.east.alias]
    replicate = [control, "run", "replicate", *flow, "--mode", "available-now"]
    call = run([*replicate, "--dry-run"], work, installed, 120).stdout
    assert str(site / "srm" / "jobs" / "replicate.py") in call, call  # the package's job and Log4j2 configuration
    assert f"-Dlog4j2.configurationFile={site / 'srm' / 'spark' / 'log4j2.properties'}" in call, call
    run(replicate, work, installed, 600)
