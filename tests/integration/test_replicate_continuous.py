"""Continuous mode: new topics, new partitions and allow-list edits flow without a restart."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.internal_topics import progress_topic_name
from srm.kafka.partitions import read_to_end
from srm.kafka.topics import create_partitions, ensure_topic, partition_counts
from srm.maintenance import heartbeats
from srm.mm2.records import ProgressRecord
from srm.replication.journal import PROGRESS_EVERY_S
from srm.replication.launch import start_replication
from srm.replication.lease import FIRST_LEASE_S
from srm.service.exposition import render
from srm.service.monitor import ConfigSource, Monitor
from srm.storage.warehouse import METRICS
from tests.helpers import produce
from tests.jobs import Writer
from tests.replication import CLEAN, Env, contents, count_records, make_env, sequence_report, sequenced

pytestmark = pytest.mark.integration

FLOW_WITHIN_S = 10.0  # the product's promise for new topics, partitions and list changes


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> float:
    """Seconds until ``condition()`` held; fails the test after ``timeout_s``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            pytest.fail(f"{what} did not happen within {timeout_s:.0f} s")
        time.sleep(0.25)
    return time.monotonic() - started


def target_records(env: Env, topic: str) -> int:
    """Records of the remote topic of ``topic`` that a read_committed consumer sees."""
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    if remote not in partition_counts(clients.admin_client(env.east)):
        return 0
    return count_records(env.east, remote)


@pytest.fixture
def running(spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]) -> Any:
    prefix = unique("live")
    # The longest transaction.interval.ms: records still show within seconds because a copier
    # commits as soon as it has caught up, not when the interval is over.
    flow = {"source": "west", "target": "east", "topics": [f"{prefix}-a.*"], "transaction.interval.ms": 60_000}
    env = make_env(kafka, tmp_path, [flow])
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    warm = f"{prefix}-a0"  # the first micro-batch also starts Spark's Python workers: wait it out
    ensure_topic(clients.admin_client(env.west), warm, 1)
    produce(env.west, warm, sequenced(1, 1))
    wait_for(lambda: target_records(env, warm) == 1, 60, "the first micro-batch")
    yield env, prefix
    run.stop()


def test_new_topic_flows_within_ten_seconds(running: Any) -> None:
    env, prefix = running
    topic = f"{prefix}-a1"
    ensure_topic(clients.admin_client(env.west), topic, 3)
    produce(env.west, topic, sequenced(3, 300))
    took = wait_for(lambda: target_records(env, topic) == 300, FLOW_WITHIN_S, f"topic {topic} on the target")
    print(f"new topic flowed in {took:.1f} s")


def test_new_partitions_flow_within_ten_seconds(running: Any) -> None:
    env, prefix = running
    topic = f"{prefix}-a2"
    admin = clients.admin_client(env.west)
    ensure_topic(admin, topic, 2)
    produce(env.west, topic, sequenced(2, 100))
    wait_for(lambda: target_records(env, topic) == 100, FLOW_WITHIN_S, "the first 100 records")
    create_partitions(admin, topic, 5)
    produce(env.west, topic, sequenced(5, 500, start=100))
    wait_for(lambda: target_records(env, topic) == 600, FLOW_WITHIN_S, "records of the new partitions")
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    assert partition_counts(clients.admin_client(env.east))[remote] == 5
    per_partition = contents(env.east, remote)
    assert [len(per_partition[p]) for p in range(5)] == [150, 150, 100, 100, 100]


def test_a_source_topic_deleted_under_the_run_leaves_its_plan_and_the_rest_flows_on(running: Any) -> None:
    """A topic deleted on the source ends the lease (a removed partition); the next plan is made
    without it, though the topic may still be listed while its ends are asked for (the job stopped
    with "cannot list offsets ...: Unknown topic or partition" before), and copying goes on."""
    env, prefix = running
    admin = clients.admin_client(env.west)
    doomed, kept, later = f"{prefix}-a3", f"{prefix}-a4", f"{prefix}-a5"
    for topic in (doomed, kept):
        ensure_topic(admin, topic, 2)
        produce(env.west, topic, sequenced(2, 100))
    wait_for(lambda: target_records(env, doomed) + target_records(env, kept) == 200, 60, "both topics copied")
    admin.delete_topics([doomed], operation_timeout=30)[doomed].result(60)
    produce(env.west, kept, sequenced(2, 100, start=100))
    wait_for(lambda: target_records(env, kept) == 200, FLOW_WITHIN_S, f"records of {kept} after {doomed} was deleted")
    ensure_topic(admin, later, 1)  # planning goes on: a topic created afterwards flows too
    produce(env.west, later, sequenced(1, 50))
    wait_for(lambda: target_records(env, later) == 50, FLOW_WITHIN_S, f"topic {later}")
    remote = env.flow().policy.format_remote_topic(env.west.alias, kept)
    expected = {p: list(range(200))[p::2] for p in range(2)}  # sequenced(2, ...): record n in partition n % 2
    assert sequence_report(contents(env.east, remote), expected) == CLEAN


def test_allow_list_edit_applies_without_restart(running: Any) -> None:
    env, prefix = running
    other = f"{prefix}-b1"  # not admitted by the flow's topics at first
    ensure_topic(clients.admin_client(env.west), other, 1)
    produce(env.west, other, sequenced(1, 50))
    time.sleep(2)
    assert target_records(env, other) == 0
    env.rewrite(topics=[f"{prefix}-a.*", f"{prefix}-b.*"])
    wait_for(lambda: target_records(env, other) == 50, FLOW_WITHIN_S, "the newly allowed topic")


def test_first_metrics_rows_come_seconds_after_the_start(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """A run's first lease is short: its metrics rows are in the warehouse seconds after the start,
    not task.lease.seconds (30) later. The topic exists before the start, so no plan change ends
    the lease early."""
    topic = unique("first-lease")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 2)
    produce(env.west, topic, sequenced(2, 40))
    assert env.flow().settings.task_lease_seconds == 30
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    try:
        wait_for(lambda: target_records(env, topic) == 40, 60, "the records")
        # From the copy, well inside the first lease: its end, then the background append.
        within = 15.0  # half of task.lease.seconds: a first lease of 30 s cannot meet it
        assert within > FIRST_LEASE_S
        wait_for(lambda: bool(env.warehouse.read(METRICS, topic=topic)), within, "the first metrics rows")
        rows = env.warehouse.read(METRICS, topic=topic)
        assert sum(r["records"] for r in rows) == 40
        assert {r["partition"] for r in rows} == {0, 1}
    finally:
        run.stop()


def last_lease(plan_log: str) -> int:
    """The number of the last lease the run planned (its plan log's newest plan)."""
    plans = Path(plan_log) / "plans"
    return max((int(p.name) for p in plans.iterdir() if p.name.isdigit()), default=-1) if plans.exists() else -1


def lease_held(plan_log: str, held_s: float, timeout_s: float) -> int:
    """The first lease after the run's first that stayed the last planned for ``held_s``."""
    deadline = time.monotonic() + timeout_s
    current, since = last_lease(plan_log), time.monotonic()
    while time.monotonic() < deadline:
        latest = last_lease(plan_log)
        if latest != current:
            current, since = latest, time.monotonic()
        elif current >= 1 and time.monotonic() - since >= held_s:
            return current
        time.sleep(0.25)
    pytest.fail(f"no lease lasted {held_s:.0f} s within {timeout_s:.0f} s (the last: {current})")


def test_an_idle_flow_leases_longer_and_ends_that_lease_soon_after_records_come(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """A lease after one that copied nothing lasts task.lease.idle.seconds; records copied during
    it end it task.lease.seconds later, so their metrics rows come as soon as with short leases."""
    topic = unique("idle-lease")
    lease_s = 5
    flow = {"source": "west", "target": "east", "topics": [topic], "task.lease.seconds": lease_s}
    env = make_env(kafka, tmp_path, [{**flow, "task.lease.idle.seconds": 600}])
    ensure_topic(clients.admin_client(env.west), topic, 2)
    heartbeats.emit(env.config, env.flow(), 0)  # its topic on west exists from the start
    plan_log = env.plan_log(env.flow())
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=plan_log)
    try:
        # Once a lease copied nothing (the first may copy the source's heartbeats), the next is an
        # idle one: it stays the last lease for three times task.lease.seconds.
        idle = lease_held(plan_log, 3 * lease_s, 60)
        # A heartbeat copied meanwhile leaves it running (the heartbeats DAG writes one a minute).
        before = target_records(env, "heartbeats")
        assert heartbeats.emit(env.config, env.flow(), 0) == 2  # the flow's pair, and the reverse one on west
        wait_for(lambda: target_records(env, "heartbeats") > before, 30, "the heartbeat on the target")
        assert lease_held(plan_log, 2 * lease_s, 30) == idle, "a heartbeat ended the idle lease"
        produce(env.west, topic, sequenced(2, 40))
        wait_for(lambda: target_records(env, topic) == 40, 30, "the records")
        # Their lease ends task.lease.seconds after the copiers' first status, not 600 s later.
        took = wait_for(lambda: bool(env.warehouse.read(METRICS, topic=topic)), 4 * lease_s, "the metrics rows")
        print(f"metrics rows {took:.1f} s after the records were on the target")
        rows = env.warehouse.read(METRICS, topic=topic)
        assert sum(r["records"] for r in rows) == 40
        assert {r["partition"] for r in rows} == {0, 1}
        assert last_lease(plan_log) > idle
    finally:
        run.stop()


def transactions_per_partition(parts: dict[int, list[tuple[Any, ...]]]) -> dict[int, int]:
    """How many transactions carried each partition's records: each ends with a commit marker, so
    its records are a run of consecutive offsets."""
    return {p: sum(1 for i, r in enumerate(rs) if i == 0 or r[4] != rs[i - 1][4] + 1) for p, rs in parts.items()}


def test_a_linger_spaces_the_transactions_of_a_steady_trickle(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """transaction.linger.ms: a record every 20 ms would get a transaction of its own (the copier
    commits as soon as it has caught up); with a linger of 500 ms at most one transaction per
    partition per 500 ms carries them, each with its commit marker and offset run, and every record
    arrives once and in order."""
    topic = unique("linger")
    linger_s = 0.5
    flow = {"source": "west", "target": "east", "topics": [topic], "transaction.interval.ms": 2_000}
    env = make_env(kafka, tmp_path, [{**flow, "transaction.linger.ms": int(linger_s * 1000)}])
    ensure_topic(clients.admin_client(env.west), topic, 2)
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    try:
        produce(env.west, topic, sequenced(2, 2))  # the first lease also starts Spark's Python workers
        wait_for(lambda: target_records(env, topic) == 2, 60, "the first records")
        producer = clients.producer(env.west, **{"enable.idempotence": True, "linger.ms": 0})
        started = time.monotonic()
        for record in sequenced(2, 300, start=2):  # a record every 20 ms for 6 s
            producer.produce(topic, **record)
            producer.poll(0)
            time.sleep(0.02)
        assert producer.flush(30) == 0
        trickle_s = time.monotonic() - started
        wait_for(lambda: target_records(env, topic) == 302, 30, "the trickle on the target")
        parts = contents(env.east, env.flow().policy.format_remote_topic(env.west.alias, topic))
        assert sequence_report(parts, {p: list(range(302))[p::2] for p in range(2)}) == CLEAN
        carried = transactions_per_partition({p: rs[1:] for p, rs in parts.items()})  # the trickle's
        # The last may end after the trickle, and a lease change commits at once (the hand-over, the
        # next lease's plan: up to 3): without the linger, about one per record (135 per partition).
        bound = trickle_s / linger_s + 6
        print(f"trickle of {trickle_s:.1f} s carried by {carried} transactions per partition (at most {bound:.0f})")
        assert all(2 <= n <= bound for n in carried.values()), carried
    finally:
        run.stop()


def latest_progress(env: Env, topic: str) -> dict[int, ProgressRecord]:
    """The latest progress record of each partition of ``topic`` (read from the topic itself)."""
    reader = clients.reader(env.east, "latest-progress")
    try:
        records = [ProgressRecord.from_message(m) for m in read_to_end(reader, progress_topic_name(env.flow()), 0)]
    finally:
        reader.close()
    return {r.partition: r for r in records if r.topic == topic}


def test_progress_is_journaled_under_load_and_plain_once_quiet(running: Any) -> None:
    """Under load most transactions carry no progress record: the latest one is journaled (the
    history holds the rest). Once the partitions are quiet a plain one states where they stand."""
    env, prefix = running
    topic = f"{prefix}-a3"
    ensure_topic(clients.admin_client(env.west), topic, 2)
    writer = Writer(env.west, topic, 2, burst=100)
    writer.start()
    try:
        wait_for(lambda: target_records(env, topic) > 0, FLOW_WITHIN_S, "the first records")
        time.sleep(2 * PROGRESS_EVERY_S)
        under_load = latest_progress(env, topic)
    finally:
        sent = writer.stop()
    assert {p: r.journaled for p, r in under_load.items()} == {0: True, 1: True}
    wait_for(lambda: target_records(env, topic) == sent, 30, "the last records")
    held = {p: len([s for s in range(sent) if s % 2 == p]) for p in range(2)}
    wait_for(
        lambda: (
            {p: (r.next_offset, r.journaled) for p, r in latest_progress(env, topic).items()}
            == {p: (n, False) for p, n in held.items()}
        ),
        2 * PROGRESS_EVERY_S + 5,
        "a plain progress record at each partition's end",
    )


def test_the_monitor_shows_what_a_running_lease_copied_within_fifteen_seconds(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """MirrorMaker 2's record counts, rates and latencies come from the copiers' statuses while a
    lease runs (srm.replication.status): with leases of 10 minutes, which write their metrics rows
    only when they end, the monitor counts the records copied within 15 s of their copy."""
    prefix = unique("status")
    flows = [{"source": "west", "target": "east", "topics": [f"{prefix}-a.*"], "task.lease.seconds": 600}]
    env = make_env(kafka, tmp_path, flows)
    flow = env.flow()
    topic, remote = f"{prefix}-a1", flow.policy.format_remote_topic(env.west.alias, f"{prefix}-a1")
    ensure_topic(clients.admin_client(env.west), topic, 2)
    run = start_replication(spark, env.config, flow, "continuous", plan_log=env.plan_log(flow))
    monitor = Monitor(ConfigSource(env.path), refresh_s=1.0).start()

    def counted() -> int:
        view = monitor.snapshot().flows.get(flow.name)
        return 0 if view is None else sum(c.records for c in view.copied if c.topic == topic)

    try:
        produce(env.west, topic, sequenced(2, 100))
        wait_for(lambda: target_records(env, topic) == 100, 60, "the first records")
        wait_for(lambda: counted() == 100, 60, "the first records in the monitor's counts")
        # The run's first lease lasts FIRST_LEASE_S: the next records go to a lease of 10 minutes.
        wait_for(lambda: run.runner.leases >= 2, 60, "the run's second lease")
        produce(env.west, topic, sequenced(2, 100, start=100))  # within the running lease
        wait_for(lambda: target_records(env, topic) == 200, FLOW_WITHIN_S, "the next records")
        took = wait_for(lambda: counted() == 200, 15.0, "the running lease's records in the monitor's counts")
        print(f"counted by the monitor {took:.1f} s after the copy")
        rows = env.warehouse.read(METRICS, topic=topic)
        assert sum(r["records"] for r in rows) < 200, rows  # the lease that copied them has no row yet
        view = monitor.snapshot().flows[flow.name]
        newest = {lease["partition"]: lease for lease in view.leases if lease["topic"] == topic}
        assert set(newest) == {0, 1}, view.leases
        now = datetime.now(UTC)
        for lease in newest.values():
            assert lease["latency_avg_ms"] is not None and lease["latency_avg_ms"] >= 0, lease
            assert (now - lease["finished_at"]).total_seconds() <= 15, lease  # the status's time
        scraped = render(monitor.snapshot()).decode()
        count = "kafka_connect_mirror_mirrorsourceconnector_record_count"
        shown = [line for line in scraped.splitlines() if line.startswith(count) and f'topic="{remote}"' in line]
        assert sum(float(line.rsplit(" ", 1)[1]) for line in shown) == 200, shown
    finally:
        monitor.stop()
        run.stop()
