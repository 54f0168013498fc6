"""A target cluster of its own, for what the shared one cannot do: forget group offsets after one
minute (offsets.retention.minutes=1), and stop for 30 s under load. Missing 0, duplicated 0."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.devenv.local import LocalClusters
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.replication.launch import start_replication
from srm.replication.progress import read_flow_progress
from tests.conftest import bootstrap, own_cluster
from tests.helpers import produce
from tests.integration.test_replicate_continuous import target_records, wait_for
from tests.jobs import Writer, exactly_once
from tests.replication import Env, contents, make_env, replicate, seq_of, sequence_report, sequenced

pytestmark = pytest.mark.integration

CLEAN = {"missing": 0, "duplicated": 0, "out_of_order": 0}
# The broker forgets a group's offsets one minute after their last commit and looks every 2 s.
FORGETFUL = {"offsets.retention.minutes": 1, "offsets.retention.check.interval.ms": 2000}
EXPIRED_AFTER_S = 75


@pytest.fixture(scope="module")
def forgetful(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalClusters]:
    """One more local cluster, started for this module, whose group offsets expire after a minute."""
    with own_cluster(tmp_path_factory.mktemp("forgetful"), "forgetful", FORGETFUL) as clusters:
        yield clusters


def forgetful_env(kafka: SrmConfig, forgetful: LocalClusters, tmp_path: Path, topic: str, partitions: int) -> Env:
    """A flow west -> the forgetful cluster for ``topic``, with 10 s leases."""
    flow = {"source": "west", "target": "east", "topics": [topic], "task.lease.seconds": 10}
    env = make_env(kafka, tmp_path, [flow], east=bootstrap(forgetful))
    ensure_topic(clients.admin_client(env.west), topic, partitions)
    return env


def progress_of(env: Env, topic: str, partitions: int) -> dict[int, int]:
    found = read_flow_progress(env.east, env.flow(), [(topic, p) for p in range(partitions)])
    return {p: progress.next_offset for (_, p), progress in found.items()}


def test_progress_outlives_offsets_retention_of_an_idle_partition(
    spark: Any, kafka: SrmConfig, forgetful: LocalClusters, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("idle")
    env = forgetful_env(kafka, forgetful, tmp_path, topic, 2)
    produce(env.west, topic, sequenced(2, 100))
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    try:
        wait_for(lambda: target_records(env, topic) == 100, 90, "the first records")
        # Partition 0 idles for longer than the target's offsets retention while partition 1 moves.
        started, seq = time.monotonic(), 100
        while time.monotonic() - started < EXPIRED_AFTER_S:
            produce(env.west, topic, [r for r in sequenced(2, 10, start=seq) if r["partition"] == 1])
            seq += 10
            time.sleep(5)
        moved = (seq - 100) // 2
        wait_for(lambda: target_records(env, topic) == 100 + moved, 30, "the moving partition")
        assert progress_of(env, topic, 2) == {0: 50, 1: 50 + moved}
    finally:
        run.stop()

    # Partition 0's progress is older than the retention (group offsets of a group without members,
    # as the copiers' are, would be gone by now). More records, then a start without the Spark
    # checkpoint: it resumes where it was, copying nothing twice.
    shutil.rmtree(env.plan_log(env.flow()))
    produce(env.west, topic, sequenced(2, 40, start=seq))
    replicate(spark, env)
    assert target_records(env, topic) == 100 + moved + 40
    assert exactly_once_by_key(env, topic) == CLEAN


def exactly_once_by_key(env: Env, topic: str) -> dict[str, int]:
    """Every source record of ``topic`` once on the target, in order (sequence numbers of the source's)."""
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    expected = {p: [seq_of(r) for r in records] for p, records in contents(env.west, topic).items()}
    return sequence_report(contents(env.east, remote), expected)


def test_target_broker_down_for_30_s_under_load(
    spark: Any, kafka: SrmConfig, forgetful: LocalClusters, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("outage")
    env = forgetful_env(kafka, forgetful, tmp_path, topic, 4)
    writer = Writer(env.west, topic, 4, burst=100)
    writer.start()
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    try:
        wait_for(lambda: target_records(env, topic) > 1000, 90, "copying")
        forgetful.down()
        time.sleep(30)
        forgetful.up()
        copied = target_records(env, topic)
        wait_for(lambda: target_records(env, topic) > copied + 1000, 120, "copying after the outage")
        assert run.loop.is_active, "the flow stopped during the outage"
        sent = writer.stop()
        wait_for(lambda: target_records(env, topic) >= sent, 120, "catching up")
    finally:
        writer.stop()
        run.stop()
    assert exactly_once(env, topic, sent, 4) == CLEAN
