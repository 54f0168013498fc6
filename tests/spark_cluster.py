"""A real Spark standalone cluster for tests: a master and workers started from Spark's own
``spark-class`` on loopback, in a folder of their own.

The workers must not see this checkout: they run a copy of Spark's home (hard links of pyspark's
folder, which holds ``jars/`` and ``python/lib/pyspark.zip`` as a Spark distribution does), the
base interpreter of this virtual environment on their PATH (not the ``.venv``: no project package,
no confluent-kafka), and, where the machine allows a mount namespace (root), a private mount
table in which an empty tmpfs covers the checkout. A job that copies records through such a
cluster proves that its code, its dependencies and its configuration travelled with it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srm.paths import project_root

START_TIMEOUT_S = 90


def can_hide(path: Path) -> bool:
    """Whether ``unshare`` can give a process a mount table in which ``path`` is empty."""
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            f"mount -t tmpfs srm-hidden {path} && ls -A {path}",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return probe.returncode == 0 and probe.stdout.strip() == ""


@dataclass
class StandaloneCluster:
    folder: Path
    ports: list[int]  # master, master web UI, then one web UI per worker
    workers: int = 2
    cores: int = 2
    memory: str = "1g"
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    hidden: bool = False
    environment: dict[str, str] = field(default_factory=dict)  # what the hosts' operators give the workers

    @property
    def master(self) -> str:
        return f"spark://127.0.0.1:{self.ports[0]}"

    @property
    def ui(self) -> str:
        return f"http://127.0.0.1:{self.ports[1]}"

    def start(self) -> None:
        import pyspark

        home = self.folder / "spark"
        if not home.exists():
            shutil.copytree(Path(pyspark.__file__).parent, home, copy_function=os.link)
        base_python = Path(sys._base_executable).resolve().parent  # type: ignore[attr-defined]
        env = {
            "HOME": str(self.folder),
            "PATH": f"{base_python}{os.pathsep}/usr/local/bin:/usr/bin:/bin",
            "SPARK_HOME": str(home),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.folder / "logs"),
            **({"JAVA_HOME": os.environ["JAVA_HOME"]} if os.environ.get("JAVA_HOME") else {}),
            **self.environment,
        }
        spark_class = str(home / "bin" / "spark-class")
        master = [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1"]
        master += ["--port", str(self.ports[0]), "--webui-port", str(self.ports[1])]
        self._spawn(master, env, "master")
        self.hidden = can_hide(project_root())
        for n in range(self.workers):
            work = self.folder / f"worker-{n}"
            work.mkdir(parents=True, exist_ok=True)
            worker = [spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1"]
            worker += ["--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work)]
            worker += ["--webui-port", str(self.ports[2 + n]), self.master]
            if self.hidden:
                hide = f'mount -t tmpfs srm-hidden {project_root()} && exec "$@"'
                worker = ["unshare", "--mount", "--propagation", "private", "sh", "-c", hide, "sh", *worker]
            self._spawn(worker, {**env, "SPARK_WORKER_DIR": str(work)}, f"worker-{n}", cwd=work)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if len(self.alive_workers()) == self.workers:
                return
            time.sleep(0.5)
        raise AssertionError(f"the standalone cluster has {len(self.alive_workers())} of {self.workers} workers")

    def _spawn(self, command: list[str], env: dict[str, str], name: str, cwd: Path | None = None) -> None:
        (self.folder / "logs").mkdir(parents=True, exist_ok=True)
        with open(self.folder / "logs" / f"{name}.log", "ab") as out:
            self.processes.append(
                subprocess.Popen(
                    command,
                    env=env,
                    cwd=cwd or self.folder,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def worker_pids(self) -> list[int]:
        """The workers' JVMs (``unshare`` and ``sh`` exec them: the pid stays)."""
        return [process.pid for process in self.processes[1:]]

    def state(self) -> dict[str, Any]:
        """The master's view (workers, running and completed applications), from its web UI's JSON."""
        try:
            with urllib.request.urlopen(f"{self.ui}/json/", timeout=5) as response:
                return json.loads(response.read())  # type: ignore[no-any-return]
        except (OSError, ValueError):  # not answering yet, or a body that is not the master's JSON yet
            return {}

    def alive_workers(self) -> list[dict[str, Any]]:
        return [w for w in self.state().get("workers", []) if w.get("state") == "ALIVE"]

    def applications(self) -> list[dict[str, Any]]:
        state = self.state()
        return [*state.get("activeapps", []), *state.get("completedapps", [])]

    def executor_logs(self) -> str:
        """Everything the executors of every application wrote (stdout and stderr)."""
        return "\n".join(path.read_text(errors="replace") for path in sorted(self.folder.glob("worker-*/app-*/*/std*")))

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)
        self.processes.clear()
