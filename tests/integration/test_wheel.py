"""The package runs from an installed wheel, without the checkout: built with ``uv build``, installed
into a folder of its own, ``srm-control validate`` reads ``conf/srm.yaml`` of the working folder and
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
from tests.replication import count_records, make_env, sequenced

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent


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
    dist, site = tmp_path / "dist", tmp_path / "site"
    run([str(BIN / "uv"), "build", "--wheel", "--out-dir", str(dist), str(project_root())], tmp_path, plain, 600)
    [wheel] = dist.glob("srm_airflow-*.whl")
    install = ["pip", "install", "--python", sys.executable, "--no-deps", "--target", str(site), str(wheel)]
    run([str(BIN / "uv"), *install], tmp_path, plain, 300)

    work = tmp_path / "work"  # outside the checkout: its conf/srm.yaml is the default configuration
    (work / "conf").mkdir(parents=True)
    shutil.copy(env.path, work / "conf" / "srm.yaml")
    installed = {**plain, "PYTHONPATH": str(site), "XDG_DATA_HOME": str(tmp_path / "data")}
    where = run([sys.executable, "-c", "import srm.jobs.replicate as j; print(j.__file__)"], work, installed, 60)
    assert where.stdout.strip().startswith(str(site)), where.stdout  # not the checkout's
    control = str(site / "bin" / "srm-control")

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
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    assert count_records(env.east, remote) == 200
