"""Exactly once under faults: SIGKILL of Spark's Python workers and of the whole driver, at random
moments while a producer writes; then the Spark checkpoint folder deleted. Missing 0, duplicated 0."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm import clients
from srm.config import SrmConfig
from srm.topics import ensure_topic
from tests.replication import contents, make_env, replicate, sequence_report, sequenced

pytestmark = pytest.mark.integration

PARTITIONS = 4
# About 20,000 records/s: micro-batches are always copying, so a kill lands inside one.
BURST = 400


class Writer(threading.Thread):
    """Produces sequence-numbered records until stopped; ``sent`` is what the source holds."""

    def __init__(self, cluster: Any, topic: str, start: int = 0) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic, self.next = cluster, topic, start
        self.halt = threading.Event()

    def run(self) -> None:
        producer = clients.producer(self.cluster, **{"enable.idempotence": True})
        while not self.halt.is_set():
            for record in sequenced(PARTITIONS, BURST, start=self.next):
                producer.produce(self.topic, **record)
            self.next += BURST
            producer.poll(0)
            time.sleep(0.02)
        assert producer.flush(30) == 0

    def stop(self) -> int:
        self.halt.set()
        self.join(60)
        return self.next


def children(pid: int) -> list[int]:
    """Every descendant of ``pid`` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().split(")")[-1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
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

    def cmdline(p: int) -> bytes:
        try:
            return Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            return b""

    def parent(p: int) -> int:
        try:
            return int(Path(f"/proc/{p}/stat").read_text().split(")")[-1].split()[1])
        except (OSError, IndexError, ValueError):
            return 0

    return [p for p in children(pid) if b"pyspark.daemon" in cmdline(p) and b"pyspark.daemon" in cmdline(parent(p))]


def start_job(config: Path, source: str, target: str, log: Path) -> subprocess.Popen[bytes]:
    script = Path(sys.executable).parent / "srm-control"
    command = [
        str(script),
        "run",
        "replicate",
        "--source",
        source,
        "--target",
        target,
        "--mode",
        "continuous",
        "--config",
        str(config),
    ]
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def wait_for_batch(job: subprocess.Popen[bytes], log: Path, seen: int, timeout_s: float = 120) -> None:
    """Until the job has logged a micro-batch after the first ``seen`` bytes of the log."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = log.read_text() if log.exists() else ""
        if " batch " in text[seen:]:
            return
        if job.poll() is not None or time.monotonic() > deadline:
            pytest.fail("the replication job did not start copying:\n" + text[-3000:])
        time.sleep(0.5)


def kill_group(process: subprocess.Popen[bytes]) -> None:
    os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def test_sigkill_anywhere_then_deleted_checkpoint_exactly_once(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    rng = random.Random(int(time.time()))
    topic = unique("fault")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "tasks.max": 2}])
    ensure_topic(clients.admin_client(env.west), topic, PARTITIONS)
    writer = Writer(env.west, topic)
    writer.start()
    log = tmp_path / "job.log"
    kills = []
    for round_ in range(3):
        seen = log.stat().st_size if log.exists() else 0
        job = start_job(env.path, env.west.alias, env.east.alias, log)
        wait_for_batch(job, log, seen)
        time.sleep(rng.uniform(1, 5))  # batches are being copied now
        if round_ == 0:  # an executor-side fault first: the query must survive it
            workers = python_workers(job.pid)
            for worker in workers:
                os.kill(worker, signal.SIGKILL)
            kills.append(f"{len(workers)} Python worker(s)")
            time.sleep(rng.uniform(3, 6))
            assert job.poll() is None, "the job died with its Python workers: " + log.read_text()[-3000:]
        kill_group(job)
        kills.append("driver")
    sent = writer.stop()
    batches = log.read_text().count(f"flow {env.west.alias}->{env.east.alias} batch ")
    assert batches >= 3, (
        f"the killed jobs copied too little to prove anything ({batches} batches):\n{log.read_text()[-3000:]}"
    )
    assert not kills[0].startswith("0 "), "no Python worker was running when it was to be killed"
    replicate(spark, env)  # drain what is left, from the target's progress and the same checkpoint
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    expected = {p: [s for s in range(sent) if s % PARTITIONS == p] for p in range(PARTITIONS)}
    report = sequence_report(contents(env.east, remote), expected)
    assert report == {"missing": 0, "duplicated": 0, "out_of_order": 0}, f"after killing {kills}: {report}"

    shutil.rmtree(env.checkpoint(env.flow()))
    more = Writer(env.west, topic, start=sent)
    more.start()
    time.sleep(1)
    sent = more.stop()
    replicate(spark, env)
    expected = {p: [s for s in range(sent) if s % PARTITIONS == p] for p in range(PARTITIONS)}
    report = sequence_report(contents(env.east, remote), expected)
    assert report == {"missing": 0, "duplicated": 0, "out_of_order": 0}, f"after deleting the checkpoint: {report}"
    assert sum(len(r) for r in contents(env.east, remote).values()) == sent
