"""The soak's flow job: ``srm-control run replicate`` in continuous mode under a supervisor that
starts it again whenever it ends, as the replicate DAG's retries would; and the scheduled
checkpoint passes (``srm-control run checkpoints``) with their duration and peak memory."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.replicators import group
from bench.usage import Usage

RESTART_DELAY_S = 1.0
# The checkpoint pass's summary line (srm.offsets.checkpointing.PassReport.summary): groups, checkpoints
# written, unchanged, seconds and the seconds of its steps. bench.checkpoints_scale reads it too.
PASS_LINE = re.compile(
    r"checkpoints: (\d+) group\(s\), (\d+) checkpoint\(s\) written, (\d+) unchanged.* in ([\d.]+) s"
    r"(?:, ([\d.]+) s of CPU)?(?: \(([^)]*)\))?"
)
STEP = re.compile(r"([a-z][a-z ]*) ([\d.]+) s")


class Job(threading.Thread):
    """Keeps ``command`` running until ``stop()``; each run's output goes to ``log``."""

    def __init__(self, command: list[str], log: Path, env: dict[str, str]) -> None:
        super().__init__(name="soak-job", daemon=True)
        self.command, self.log, self.env = command, log, env
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.exits: list[tuple[float, int]] = []  # (time, exit code) of every run that ended
        self._stopping = threading.Event()
        self._launched = threading.Condition()

    def run(self) -> None:
        while not self._stopping.is_set():
            with self.log.open("ab") as out, self._launched:
                self.process = subprocess.Popen(
                    self.command, stdout=out, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
                )
                self.starts += 1
                self._launched.notify_all()
            code = self.process.wait()
            self._clean(self.process.pid)
            self.exits.append((time.time(), code))
            self._stopping.wait(RESTART_DELAY_S)

    def pid(self) -> int | None:
        process = self.process
        return process.pid if process is not None and process.poll() is None else None

    def wait_restarted(self, old_pid: int, timeout_s: float = 120.0) -> None:
        deadline = time.monotonic() + timeout_s
        with self._launched:
            while self.process is not None and self.process.pid == old_pid and time.monotonic() < deadline:
                self._launched.wait(1.0)

    def spark_submit(self) -> int | None:
        """The pid of the job's spark-submit JVM (the child of ``srm-control run``), the Spark driver."""
        pid = self.pid()
        try:
            children = psutil.Process(pid).children() if pid is not None else []
        except psutil.NoSuchProcess:
            return None
        return next((c.pid for c in children if "org.apache.spark.deploy.SparkSubmit" in _cmdline(c)), None)

    def python_workers(self) -> list[psutil.Process]:
        """The job's forked Python workers (children of pyspark's daemon, where copiers run)."""
        pid = self.pid()
        if pid is None:
            return []
        try:
            tree = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        # A worker is forked from the daemon: same command line, the daemon its parent.
        daemons = {p.pid for p in tree if "pyspark.daemon" in " ".join(_cmdline(p))}
        return [p for p in tree if p.pid in daemons and _parent(p) in daemons]

    def stop(self, timeout_s: float = 90.0) -> None:
        """Gracefully (SIGTERM: the job commits and releases the flow), then whatever is left."""
        self._stopping.set()
        process = self.process
        if process is not None and process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout_s)
            self._clean(process.pid)
        self.join(timeout_s)

    @staticmethod
    def _clean(pgid: int) -> None:
        """What a run left (a Python driver or worker whose JVM was killed): killed."""
        for left in group(pgid):
            try:
                left.kill()
            except psutil.Error:
                continue


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return list(process.cmdline())
    except psutil.Error:
        return []


def _parent(process: psutil.Process) -> int:
    try:
        return int(process.ppid())
    except psutil.Error:
        return -1


@dataclass
class PassResult:
    at_s: float
    seconds: float | None  # the pass's own duration (its log line), None if it failed
    wall_s: float  # the whole spark-submit, Spark's start included
    peak_pss_mb: int
    peak_rss_mb: int
    groups: int
    positions: int  # the group positions it translated (checkpoints written and unchanged)
    exit_code: int
    steps: dict[str, float] = field(default_factory=dict)  # seconds of each step of the pass
    cpu_s: float | None = None  # CPU seconds of the pass's process during the pass (its log line)


def pass_steps(found: re.Match[str] | None) -> dict[str, float]:
    """The seconds of each step a pass's summary line (PASS_LINE) names."""
    if found is None or not found[6]:
        return {}
    return {name.strip(): float(seconds) for name, seconds in STEP.findall(found[6])}


def pass_cpu(found: re.Match[str] | None) -> float | None:
    """The CPU seconds of the pass's process a summary line (PASS_LINE) names, if it names them."""
    return float(found[5]) if found is not None and found[5] else None


def checkpoint_pass(command: list[str], log: Path, env: dict[str, str], at_s: float) -> PassResult:
    """One pass, its memory sampled (bench.usage) and its duration read from its log line."""
    started = time.monotonic()
    with log.open("ab") as out:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
        usage = Usage(process)
        output, _ = process.communicate(timeout=900)
        out.write(output)
    figures = usage.finish()
    found = PASS_LINE.search(output.decode(errors="replace"))
    return PassResult(
        at_s,
        float(found[4]) if found else None,
        round(time.monotonic() - started, 1),
        figures["peak_pss_mb"],
        figures["peak_rss_mb"],
        int(found[1]) if found else 0,
        int(found[2]) + int(found[3]) if found else 0,
        process.returncode,
        pass_steps(found),
        pass_cpu(found),
    )
