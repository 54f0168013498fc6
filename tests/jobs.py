"""Replication jobs as separate processes (``srm-control run replicate``), a steady writer of
sequence-numbered records, and the process-tree signals fault tests need."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

from srm.kafka import clients
from tests.replication import Env, contents, sequence_report, sequenced


class Writer(threading.Thread):
    """Produces sequence-numbered records (``burst`` every 20 ms) until stopped; ``sent`` is what
    the source holds."""

    def __init__(
        self,
        cluster: Any,
        topic: str,
        partitions: int,
        *,
        start: int = 0,
        burst: int = 400,
        only: tuple[int, ...] = (),
        size: int = 64,
    ) -> None:
        """``only``: write to these partitions alone (record ``seq`` to ``only[seq % len(only)]``)."""
        super().__init__(daemon=True)
        self.cluster, self.topic, self.partitions, self.burst = cluster, topic, partitions, burst
        self.only, self.size = only, size
        self.next = start
        self.halt = threading.Event()

    def partition_of(self, seq: int) -> int:
        return self.only[seq % len(self.only)] if self.only else seq % self.partitions

    def run(self) -> None:
        producer = clients.producer(self.cluster, **{"enable.idempotence": True})
        while not self.halt.is_set():
            for record in sequenced(len(self.only) or self.partitions, self.burst, start=self.next, size=self.size):
                if self.only:  # sequenced() spread them over len(only) partitions
                    record["partition"] = self.only[record["partition"]]
                producer.produce(self.topic, **record)
            self.next += self.burst
            producer.poll(0)
            time.sleep(0.02)
        assert producer.flush(30) == 0

    def stop(self) -> int:
        self.halt.set()
        self.join(60)
        return self.next


def exactly_once(env: Env, topic: str, sent: int, partitions: int, start: int = 0) -> dict[str, int]:
    """Missing, duplicated and out-of-order records of ``topic``'s remote topic on the target."""
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    expected = {p: [s for s in range(start, sent) if s % partitions == p] for p in range(partitions)}
    return sequence_report(contents(env.east, remote), expected)


class Job:
    """``srm-control run replicate`` for one flow, in a session of its own, logging to a file."""

    started: ClassVar[list[Job]] = []  # killed at the end of the test if still running (conftest)

    def __init__(self, config: Path, source: str, target: str, log: Path, *, master: str | None = None) -> None:
        self.log = log
        command = [str(Path(sys.executable).parent / "srm-control"), "run", "replicate", "--source", source]
        command += ["--target", target, "--mode", "continuous", "--config", str(config)]
        if master:
            command += ["--master", master]
        self.seen = log.stat().st_size if log.exists() else 0
        with open(log, "ab") as out:
            self.process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        Job.started.append(self)

    @classmethod
    def kill_leftovers(cls) -> None:
        """A failed test must not leave a job copying (and using the CPU) through the next tests."""
        for job in cls.started:
            if job.process.poll() is None:
                job.kill()
        cls.started.clear()

    @property
    def pid(self) -> int:
        return self.process.pid

    def text(self) -> str:
        return self.log.read_text()[self.seen :] if self.log.exists() else ""

    def wait_for(self, pattern: str, timeout_s: float = 120.0, *, count: int = 1) -> re.Match[str]:
        """Until this job's log has ``count`` matches of ``pattern``; the last one."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = list(re.finditer(pattern, self.text()))
            if len(found) >= count:
                return found[count - 1]
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no {pattern!r} in the job's log (exit {self.process.poll()}):\n{self.text()[-4000:]}")
            time.sleep(0.5)

    def leases(self) -> int:
        return len(re.findall(r"flow \S+ lease \d+: ", self.text()))

    def stop(self, timeout_s: float = 90.0) -> int:
        """Ctrl-C: the copiers commit and the job ends; its exit status."""
        if self.process.poll() is None:
            os.killpg(self.pid, signal.SIGINT)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"the job did not stop within {timeout_s:.0f} s of Ctrl-C:\n{self.text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole tree: driver, JVM, Python daemons and workers (they have groups of their own)."""
        signal_tree(self.pid, signal.SIGKILL)
        self.process.wait(30)

    def freeze(self) -> None:
        """A zombie: every process of the job stopped where it is, open transactions included."""
        signal_tree(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        signal_tree(self.pid, signal.SIGCONT)


def signal_tree(pid: int, signum: int) -> None:
    for process in [pid, *descendants(pid)]:
        try:
            os.kill(process, signum)
        except ProcessLookupError:
            continue


def descendants(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            parent = _parent(int(entry.name))
            if parent:
                parents[int(entry.name)] = parent
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        kids = [p for p, parent in parents.items() if parent == current]
        found += kids
        todo += kids
    return found


def python_workers(pid: int) -> list[int]:
    """Spark's Python worker processes under ``pid``: the children forked by a ``pyspark.daemon``
    (the daemons themselves are left alone, as an executor's worker pool would be)."""
    daemon = b"pyspark.daemon"
    return [p for p in descendants(pid) if daemon in _cmdline(p) and daemon in _cmdline(_parent(p))]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0
