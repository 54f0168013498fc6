"""Airflow on this machine, for ``make demo``, ``make airflow`` and the DAG tests.

An ``AIRFLOW_HOME`` of its own (SQLite metadata database, logs), the DAG folder of this project,
the flows of one srm.yaml, and the Spark connection as an environment variable, so nothing is
configured by hand. Runs the ``airflow`` command of this environment; never imports Airflow.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srm.errors import SrmError
from srm.paths import project_root

SPARK_MASTER = "local[*, 4]"  # 4 task retries, as the local Spark sessions of the jobs


@dataclass(frozen=True)
class LocalAirflow:
    home: Path
    config_file: Path

    def env(self) -> dict[str, str]:
        """The environment of every ``airflow`` command run for this home."""
        bin_dir = str(Path(sys.executable).parent)
        env = dict(os.environ)
        env.update(
            AIRFLOW_HOME=str(self.home),
            AIRFLOW__CORE__DAGS_FOLDER=str(project_root() / "dags"),
            AIRFLOW__CORE__PLUGINS_FOLDER=str(project_root() / "plugins"),
            AIRFLOW__CORE__LOAD_EXAMPLES="False",
            AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION="True",
            AIRFLOW_CONN_SPARK_DEFAULT=json.dumps({"conn_type": "spark", "host": SPARK_MASTER}),
            SRM_CONFIG=str(self.config_file.resolve()),
            PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        )
        return env

    def airflow(self, *args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess[str]:
        command = [str(Path(sys.executable).parent / "airflow"), *args]
        result = subprocess.run(command, check=False, env=self.env(), capture_output=True, text=True, timeout=timeout)
        if check and result.returncode != 0:
            tail = "\n".join((result.stdout + result.stderr).splitlines()[-30:])
            raise SrmError(f"`airflow {' '.join(args)}` exited with {result.returncode}:\n{tail}")
        return result

    def migrate(self) -> None:
        """Create (or upgrade) the metadata database; quick when it is current."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.airflow("db", "migrate", timeout=300)

    def dags_test(self, dag_id: str, conf: dict[str, Any] | None = None, *, timeout: float = 900) -> DagRun:
        """``airflow dags test DAG_ID -c CONF``: one run of every task in this process; its log and state."""
        args = ["dags", "test", dag_id]
        if conf:
            args += ["-c", json.dumps(conf)]
        result = self.airflow(*args, timeout=timeout, check=False)
        return DagRun(dag_id, result.returncode, result.stdout + result.stderr)


@dataclass(frozen=True)
class DagRun:
    dag_id: str
    returncode: int
    log: str

    @property
    def state(self) -> str:
        """The run's final state, from the line ``airflow dags test`` ends with."""
        found = re.findall(r"DagRun Finished: .*?\bstate=(\w+)", self.log)
        return found[-1] if found else "unknown"

    @property
    def succeeded(self) -> bool:
        return self.returncode == 0 and self.state == "success"

    def highlights(self) -> list[str]:
        """What the tasks said: the project's own log lines (and failures), without Airflow's chatter."""
        out = []
        for line in self.log.splitlines():
            match = LOG_LINE.match(line)
            if match:
                level, message, logger = match.groups()
                job = JOB_LINE.match(message)
                if job:
                    out.append(job.group(1))
                elif logger.startswith("srm") or ".srm." in logger or level == "error" or message.startswith("error: "):
                    out.append(message)
            elif line.startswith(("srm.errors.", "airflow.sdk.exceptions.")):
                out.append(line.split(": ", 1)[-1])
        return out


# 2026-11-21T08:50:10.274137Z [info     ] message [logger] loc=file.py:89
LOG_LINE = re.compile(r"^\S+Z \[(\w+)\s*\] (.*?)\s+\[([\w.]+)\] loc=")
# a Spark job's own line, relayed by the SparkSubmit hook: "2026-11-21 08:51:10,131 INFO srm.replicate: ..."
JOB_LINE = re.compile(r"^\d{4}-\d\d-\d\d [\d:,]+ \w+ srm[\w.]*: (.*)$")


def main(argv: list[str] | None = None) -> int:
    """``python -m srm.devenv.airflow standalone|env``: the Airflow UI on this machine, or its environment.

    ``standalone`` runs ``airflow standalone`` (scheduler, triggerer, DAG processor, API server on
    http://127.0.0.1:8080, everyone admin) for the DAGs of conf/srm.yaml or $SRM_CONFIG;
    ``env`` prints the ``export`` lines that make the ``airflow`` command use the same setup.
    """
    import argparse
    import shlex

    from srm.config.loader import default_config_path

    parser = argparse.ArgumentParser(prog="python -m srm.devenv.airflow", description=main.__doc__)
    parser.add_argument("command", choices=("standalone", "env"))
    args = parser.parse_args(argv)
    local = LocalAirflow(project_root() / ".local" / "airflow", default_config_path())
    env = local.env()
    env.update(AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS="True", AIRFLOW__API__HOST="127.0.0.1")
    if args.command == "env":
        for key in sorted(k for k in env if k.startswith(("AIRFLOW", "SRM_")) or k == "PATH"):
            print(f"export {key}={shlex.quote(env[key])}")
        return 0
    local.migrate()
    print(f"Airflow standalone: AIRFLOW_HOME={local.home}, flows of {local.config_file}; http://127.0.0.1:8080")
    os.execve(str(Path(sys.executable).parent / "airflow"), ["airflow", "standalone"], env)


if __name__ == "__main__":
    sys.exit(main())
