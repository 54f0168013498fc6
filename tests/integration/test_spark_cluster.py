"""The jobs on a real Spark standalone cluster whose workers cannot see this checkout
(tests/spark_cluster.py): code, dependencies and configuration travel with the job."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.paths import project_root
from tests.checkpointing import commit, read_from
from tests.helpers import produce
from tests.helpers import srm_control as run
from tests.jobs import Job, Writer, exactly_once
from tests.replication import contents, make_env, sequenced
from tests.spark_cluster import StandaloneCluster

pytestmark = pytest.mark.integration


def ran_on(spark_cluster: StandaloneCluster, name: str) -> list[dict[str, Any]]:
    """The applications called ``name`` the master ran, each with the cores it was granted."""
    return [app for app in spark_cluster.applications() if app.get("name") == name]


def test_the_workers_see_neither_the_checkout_nor_its_environment(spark_cluster: StandaloneCluster) -> None:
    if not spark_cluster.hidden:
        pytest.skip("no mount namespace here (not root): the workers only run without the .venv on their PATH")
    for pid in spark_cluster.worker_pids():
        seen = subprocess.run(
            ["nsenter", "-t", str(pid), "-m", "ls", "-A", str(project_root())],
            capture_output=True,
            text=True,
            check=True,
        )
        assert seen.stdout == "", f"worker {pid} sees the checkout: {seen.stdout[:200]}"
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert not [v for v in environment if str(project_root()).encode() in v], environment


def test_replicate_and_checkpoint_through_the_cluster_exactly_once_and_fail_over_exactly(
    spark_cluster: StandaloneCluster, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic, group = unique("cluster-copy"), unique("cluster-reader")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "tasks.max": 2}])
    flow = env.flow()
    ensure_topic(clients.admin_client(env.west), topic, 4)
    produce(env.west, topic, sequenced(4, 4000))
    flow_args = ("--source", flow.source, "--target", flow.target, "--master", spark_cluster.master)

    copied = run(env.path, "run", "replicate", *flow_args, "--mode", "available-now")
    assert copied.returncode == 0, copied.stdout[-3000:] + copied.stderr[-3000:]
    assert exactly_once(env, topic, 4000, 4) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    apps = ran_on(spark_cluster, f"srm replicate {flow.name}")
    assert len(apps) == 1 and apps[0]["cores"] > 0, spark_cluster.applications()

    committed = {0: 0, 1: 17, 2: 500, 3: 1000}
    commit(env.west, group, {(topic, p): o for p, o in committed.items()})
    checkpointed = run(env.path, "run", "checkpoints", *flow_args)
    assert checkpointed.returncode == 0, checkpointed.stdout[-3000:] + checkpointed.stderr[-3000:]
    assert ran_on(spark_cluster, f"srm checkpoints {flow.name}") == []  # the pass holds no executors

    translated = run(env.path, "translate", "--source", flow.source, "--target", flow.target, "--group", group)
    assert translated.returncode == 0, translated.stderr
    remote = flow.policy.format_remote_topic(flow.source, topic)
    source = contents(env.west, topic)
    lines = sorted(translated.stdout.splitlines())
    assert len(lines) == 4, translated.stdout
    for line in lines:
        partition = int(line.split("[", 1)[1].split("]", 1)[0])
        downstream = int(line.rsplit("@", 1)[1])
        unread = [r[:4] for r in source[partition] if r[4] >= committed[partition]]
        assert read_from(env.east, remote, partition, downstream) == unread, line


def test_a_continuous_flow_on_the_cluster_copies_every_record_once(
    spark_cluster: StandaloneCluster, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("cluster-live")
    env = make_env(
        kafka,
        tmp_path,
        # 4 slots: the cores of both workers, whose executors register one after the other
        [{"source": "west", "target": "east", "topics": [topic], "tasks.max": 4, "task.lease.seconds": 5}],
    )
    flow = env.flow()
    ensure_topic(clients.admin_client(env.west), topic, 4)
    job = Job(env.path, flow.source, flow.target, tmp_path / "job.log", master=spark_cluster.master)
    writer = Writer(env.west, topic, 4, burst=100)
    writer.start()
    job.wait_for(r"flow \S+ lease \d+: ", timeout_s=180)
    time.sleep(5)
    sent = writer.stop()
    deadline = time.monotonic() + 60
    while exactly_once(env, topic, sent, 4)["missing"] and time.monotonic() < deadline:
        time.sleep(1)
    assert job.stop() == 0, job.text()[-3000:]
    assert exactly_once(env, topic, sent, 4) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    apps = ran_on(spark_cluster, f"srm replicate {flow.name}")
    assert len(apps) == 1 and apps[0]["cores"] > 0, spark_cluster.applications()


PLACED_SLOTS = """
import json, os, sys
from pyspark.sql import SparkSession
from srm.replication.slot_daemons import SlotExecutors, slot_rdd, task_slots


def where(slot):
    daemon = os.getppid()  # the slot's pyspark.daemon, a child of its executor's JVM
    with open(f"/proc/{daemon}/stat") as stat:
        executor_jvm = int(stat.read().rsplit(")", 1)[1].split()[1])
    return [(slot, os.getpid(), executor_jvm)]


spark = SparkSession.builder.master(sys.argv[1]).appName("placed-slots").getOrCreate()
context = spark.sparkContext
executors = SlotExecutors(context)
cores = task_slots(context, 4, quiet_s=3.0)  # as the warm-up waits for the executors
rounds = []
for _ in range(3):
    places = executors.locations(range(4))
    rdds = [slot_rdd(context, "placed", slot, [slot], where, location=places.get(slot)) for slot in range(4)]
    rounds.append(context.union(rdds).collect())
print(json.dumps({"cores": cores, "places": places, "rounds": rounds}))
spark.stop()
"""


def test_each_copy_slot_keeps_its_executor_and_worker_from_job_to_job(
    spark_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    """Spark gives a task without a preferred place to an executor at random: a slot's worker (its
    producer, its resident copier) would be left behind. Slots name their executor instead."""
    script = tmp_path / "placed_slots.py"
    script.write_text(PLACED_SLOTS)
    done = subprocess.run(
        [str(project_root() / ".venv" / "bin" / "python"), str(script), spark_cluster.master],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        # the workers' Python is the base interpreter on their PATH, not this checkout's .venv
        env={**os.environ, "PYSPARK_PYTHON": "python3"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["cores"] == 4, found  # two workers of 2 cores, waited for
    assert sorted(found["places"].values()).count(found["places"]["0"]) == 2, found["places"]  # 2 slots each
    by_slot: dict[int, set[tuple[int, int]]] = {}
    for done_round in found["rounds"]:
        for slot, worker, executor in done_round:
            by_slot.setdefault(slot, set()).add((worker, executor))
    assert all(len(places) == 1 for places in by_slot.values()), by_slot  # the same worker in every job
    executors = [next(iter(places))[1] for places in by_slot.values()]
    assert sorted(executors.count(e) for e in set(executors)) == [2, 2], by_slot  # spread over both executors
