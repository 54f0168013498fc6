"""Exactly once under faults: SIGKILL of Spark's Python workers and of the whole job, at random
moments while a producer writes; then the Spark checkpoint folder deleted. Missing 0, duplicated 0."""

from __future__ import annotations

import os
import random
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from tests.integration.test_replicate_continuous import target_records, wait_for
from tests.jobs import Job, Writer, exactly_once, python_workers
from tests.replication import CLEAN, make_env, replicate

pytestmark = pytest.mark.integration

PARTITIONS = 4


def test_sigkill_anywhere_then_deleted_checkpoint_exactly_once(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    rng = random.Random(int(time.time()))
    topic = unique("fault")
    # Short leases: the kills also land on lease boundaries.
    flow = {"source": "west", "target": "east", "topics": [topic], "tasks.max": 2, "task.lease.seconds": 5}
    env = make_env(kafka, tmp_path, [flow])
    ensure_topic(clients.admin_client(env.west), topic, PARTITIONS)
    writer = Writer(env.west, topic, PARTITIONS, burst=100)  # ~5,000 records/s: a kill lands inside a transaction
    writer.start()
    log = tmp_path / "job.log"
    kills = []
    for round_ in range(3):
        job = Job(env.path, env.west.alias, env.east.alias, log)
        before = target_records(env, topic)
        wait_for(lambda: target_records(env, topic) > before, 120, "copying")  # noqa: B023
        time.sleep(rng.uniform(1, 5))
        if round_ == 0:  # an executor-side fault first: the query must survive it
            workers = python_workers(job.pid)
            for worker in workers:
                os.kill(worker, signal.SIGKILL)
            kills.append(f"{len(workers)} Python worker(s)")
            copied = target_records(env, topic)
            try:
                wait_for(lambda: target_records(env, topic) > copied, 60, "copying after the workers were killed")  # noqa: B023
            except pytest.fail.Exception as exc:
                raise AssertionError(f"{exc}; the job's log ends:\n{job.text()[-4000:]}") from None
            assert job.process.poll() is None, "the job died with its Python workers: " + job.text()[-3000:]
        job.kill()
        kills.append("the whole job")
    sent = writer.stop()
    assert not kills[0].startswith("0 "), "no Python worker was running when it was to be killed"
    replicate(spark, env)  # drain what is left, from the target's progress and the same checkpoint
    assert exactly_once(env, topic, sent, PARTITIONS) == CLEAN, f"after killing {kills}"

    shutil.rmtree(env.plan_log(env.flow()))
    more = Writer(env.west, topic, PARTITIONS, start=sent, burst=100)
    more.start()
    time.sleep(1)
    sent = more.stop()
    replicate(spark, env)
    assert exactly_once(env, topic, sent, PARTITIONS) == CLEAN, "after deleting the checkpoint"
