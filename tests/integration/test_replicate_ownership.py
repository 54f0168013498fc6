"""One flow, several runs: the newest run owns the flow and fences every earlier one, whatever their
tasks.max or topic lists, and tasks.max edited while the flow runs. Missing 0, duplicated 0."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from tests.integration.test_replicate_continuous import target_records, wait_for
from tests.jobs import Job, Writer, exactly_once
from tests.replication import CLEAN, Env, make_env

pytestmark = pytest.mark.integration

PARTITIONS = 6


def copying(env: Env, topic: str, job: Job, timeout_s: float = 120) -> None:
    """Until more of ``topic`` is on the target than now (``job`` must keep running meanwhile)."""
    before = target_records(env, topic)

    def more() -> bool:
        assert job.process.poll() is None, f"the job ended ({job.process.poll()}):\n{job.text()[-3000:]}"
        return target_records(env, topic) > before

    wait_for(more, timeout_s, f"copying of {topic}")


def caught_up(env: Env, writers: list[Writer], timeout_s: float = 120) -> None:
    """Stop the writers, then wait until the target holds everything they wrote."""
    for writer in writers:
        sent = writer.stop()
        wait_for(lambda: target_records(env, writer.topic) >= sent, timeout_s, f"{writer.topic} caught up")  # noqa: B023


def test_a_zombie_run_is_fenced_by_a_newer_run_with_other_tasks_and_topics(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    a, b = unique("own-a"), unique("own-b")
    flow = {"source": "west", "target": "east", "topics": [a], "tasks.max": 2, "task.lease.seconds": 10}
    env = make_env(kafka, tmp_path, [flow])
    # The second run: the same flow from another file (think Airflow's copy and srm-control's),
    # with another topic list, another tasks.max and a Spark checkpoint of its own.
    data = yaml.safe_load(env.path.read_text())
    data["flows"][0].update({"topics": [a, b], "tasks.max": 3})
    data["storage"]["plan_logs"] = str(tmp_path / "second-plan-logs")
    second_config = tmp_path / "second.yaml"
    second_config.write_text(yaml.safe_dump(data))
    for topic in (a, b):
        ensure_topic(clients.admin_client(env.west), topic, PARTITIONS)
    writers = [Writer(env.west, topic, PARTITIONS, burst=60) for topic in (a, b)]
    for writer in writers:
        writer.start()

    try:
        first = Job(env.path, env.west.alias, env.east.alias, tmp_path / "first.log", master="local[3, 4]")
        copying(env, a, first)
        first.freeze()  # a zombie: alive, transactions open, but not scheduled
        try:
            second = Job(second_config, env.west.alias, env.east.alias, tmp_path / "second.log", master="local[4, 4]")
            claim = second.wait_for(r"run (\w+) \(epoch \d+\) takes over from run \w+ \(srm-control run on host")
            copying(env, b, second)
            copying(env, a, second)
        finally:
            first.thaw()
        assert first.process.wait(120) == 3, first.text()[-3000:]  # exit status 3: taken over
        assert f"error: flow {env.flow().name} was taken over by run {claim.group(1)} (srm-control run" in first.text()
        copying(env, a, second)  # the newer run goes on
        caught_up(env, writers)
        assert second.stop() == 0, second.text()[-3000:]
    finally:
        for writer in writers:
            writer.stop()
    for writer in writers:
        assert exactly_once(env, writer.topic, writer.next, PARTITIONS) == CLEAN, writer.topic


def test_tasks_max_edited_while_the_flow_runs(kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]) -> None:
    """srm-control's own local master leaves room for tasks.max raised to twice its first value: the
    running job takes it at the next lease (a new epoch), and takes it back."""
    topic = unique("own-tasks")
    flow = {"source": "west", "target": "east", "topics": [topic], "task.lease.seconds": 10, "tasks.max": 2}
    env = make_env(kafka, tmp_path, [flow])
    ensure_topic(clients.admin_client(env.west), topic, PARTITIONS)
    writer = Writer(env.west, topic, PARTITIONS, burst=100)
    writer.start()
    try:
        job = Job(env.path, env.west.alias, env.east.alias, tmp_path / "job.log")  # srm-control's master
        copying(env, topic, job)
        for before, after in ((2, 4), (4, 2)):
            env.rewrite(**{"tasks.max": after})
            job.wait_for(rf"tasks.max {before} -> {after}, epoch \d+ begins")
            time.sleep(2)
            copying(env, topic, job)
        caught_up(env, [writer])
        assert job.stop() == 0, job.text()[-3000:]
    finally:
        writer.stop()
    assert exactly_once(env, topic, writer.next, PARTITIONS) == CLEAN


def test_a_new_claim_fences_both_producers_of_every_slot_of_the_earlier_epoch(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """Continuous mode alternates two transactional producers per slot: a zombie's open transaction
    on either of them is aborted by the next claim, and neither can commit afterwards."""
    from confluent_kafka import KafkaException

    from srm.kafka.internal_topics import ensure_internal_topic, owners_topic
    from srm.kafka.partitions import read_to_end
    from srm.kafka.topics import broker_count
    from srm.replication.job import copy_transactional_ids
    from srm.replication.ownership import FlowOwner

    topic = unique("own-fence")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "tasks.max": 2}])
    flow = env.flow()
    admin = clients.admin_client(env.east)
    ensure_internal_topic(admin, owners_topic(flow), broker_count(admin))
    ensure_topic(admin, topic, 2)
    first = FlowOwner(env.east, flow, "the zombie")
    epoch = first.claim(2, "continuous").epoch
    zombies = []
    for slot in range(2):
        ids = copy_transactional_ids(flow, epoch, slot)
        assert ids[1] == f"{ids[0]}.alt"
        for transactional_id in ids:
            producer = clients.producer(env.east, **{"transactional.id": transactional_id})
            producer.init_transactions(30)
            producer.begin_transaction()
            producer.produce(topic, value=transactional_id.encode(), partition=slot)
            producer.flush(30)
            zombies.append((transactional_id, producer))
    second = FlowOwner(env.east, flow, "the newer run")
    try:
        assert second.claim(3, "continuous").epoch == epoch + 1
        for transactional_id, producer in zombies:
            with pytest.raises(KafkaException) as refused:
                producer.commit_transaction(30)
            assert refused.value.args[0].fatal(), (transactional_id, refused.value)
    finally:
        first.close()
        second.close()
    # Every zombie record reached the log, and none is visible: each transaction was aborted.
    seen = {}
    for isolation in ("read_uncommitted", "read_committed"):
        consumer = clients.reader(env.east, unique("own-fence-reader"), **{"isolation.level": isolation})
        try:
            seen[isolation] = sorted(m.value().decode() for m in read_to_end(consumer, topic, range(2)))
        finally:
            consumer.close()
    assert seen["read_uncommitted"] == sorted(t for t, _ in zombies)
    assert seen["read_committed"] == []


def slot_names(part: str) -> set[str]:
    """The partitions a slot's part of a placement line names: "slot 0: 2 partition(s), 9 KiB/s (t[0], t[2])"."""
    return set(part[part.index("(", part.index("KiB/s")) + 1 : part.rindex(")")].split(", "))


def test_hot_partitions_sharing_a_slot_are_placed_apart_by_load_in_a_new_epoch_exactly_once(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """4 partitions on 2 slots, dealt 0, 2 -> slot 0 and 1, 3 -> slot 1 while nothing is known of
    their load (by count, in the epoch's first placement or as they are found within it); only 0 and 2
    carry records (~1 MiB/s each): the flow places them again, apart."""
    from tests.replication import contents, sequence_report

    topic = unique("own-hot")
    flow = {
        "source": "west",
        "target": "east",
        "topics": [topic],
        "tasks.max": 2,
        "task.lease.seconds": 5,
        "tasks.rebalance.interval.seconds": 10,
    }
    env = make_env(kafka, tmp_path, [flow])
    ensure_topic(clients.admin_client(env.west), topic, 4)
    writer = Writer(env.west, topic, 4, burst=20, only=(0, 2), size=2048)  # up to 1,000 records of 2 KiB a second
    writer.start()
    try:
        job = Job(env.path, env.west.alias, env.east.alias, tmp_path / "job.log", master="local[2, 4]")
        moved = job.wait_for(
            r"partitions placed again by load: the busiest slot copies ([\d,]+) KiB/s where a new placement gives it "
            r"([\d,]+) KiB/s; epoch (\d+) begins",
            timeout_s=120,
        )
        busiest, best = (int(moved.group(i).replace(",", "")) for i in (1, 2))
        assert busiest >= 1.8 * best, moved.group(0)  # both hot ones on one slot, then one on each
        hot = {f"{topic}[0]", f"{topic}[2]"}
        placing = r"epoch \d+ places (?:the partitions by load|\d+ partition\(s\) found within it by count): ([^\n]*)"
        before = job.text()[: moved.start()]
        last = [m.group(1) for m in re.finditer(placing, before)][-1]  # in effect when the move was decided
        assert any(hot <= slot_names(part) for part in last.split("; ")), last  # both hot ones on one slot
        placed = job.wait_for(rf"epoch {moved.group(3)} places the partitions by load: ([^\n]*)")
        apart = [len(hot & slot_names(part)) for part in placed.group(1).split("; ")]
        assert apart == [1, 1], placed.group(0)  # one hot partition on each slot
        copying(env, topic, job)  # the new epoch copies on
        caught_up(env, [writer])
        assert job.stop() == 0, job.text()[-3000:]
    finally:
        writer.stop()
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    expected = {p: [s for s in range(writer.next) if writer.partition_of(s) == p] for p in range(4)}
    assert sequence_report(contents(env.east, remote), expected) == CLEAN
