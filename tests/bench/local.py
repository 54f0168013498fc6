"""The benchmarks' tests run on the local clusters of conf/srm.yaml (`make kafka-up`), as a user does."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def local_clusters_running() -> bool:
    command = [str(ROOT / ".venv/bin/srm-control"), "local", "status"]
    status = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    return "running (pid" in status.stdout


def run_on_local_clusters(
    command: list[str], timeout_s: float, around: Callable[[], AbstractContextManager[Any]] = nullcontext
) -> subprocess.CompletedProcess[str]:
    """``command`` run in the checkout with the local clusters up (``around()`` entered before it and
    left after it, the clusters still up); they are stopped after it unless they were running
    before. Fails the test when the clusters do not start."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    were_running = local_clusters_running()
    try:
        up = subprocess.run(["make", "kafka-up"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr[-3000:]
        with around():
            return subprocess.run(
                command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False
            )
    finally:
        if not were_running:
            subprocess.run(["make", "kafka-down"], cwd=ROOT, env=env, capture_output=True, check=False)
