"""Faults that do not go away end the run within the flow's errors.retry.timeout, with a message that
says what, where and what to do, and the status says so; once the cause is fixed (or the topic taken
out of the flow) the next run goes on exactly: 0 lost, 0 duplicated."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.devenv.local import LocalClusters
from srm.errors import DataLossError, LastingFaultError, ReplicationError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.kafka.topics import ensure_topic
from srm.replication.launch import start_replication
from tests.conftest import bootstrap, broker_pid
from tests.helpers import produce
from tests.integration.test_replicate_continuous import target_records, wait_for
from tests.jobs import Writer
from tests.jobs import exactly_once as exactly_once_sent
from tests.replication import (
    Env,
    contents,
    make_env,
    replicate,
    seq_of,
    sequence_report,
    sequenced,
    shown_status,
)

pytestmark = pytest.mark.integration

CLEAN = {"missing": 0, "duplicated": 0, "out_of_order": 0}
BOUND_MS = 20_000  # the flows' errors.retry.timeout here


def newest_state(env: Env) -> str | None:
    """What the flow's run recorded last in the flow_states table (what the status shows from)."""
    from srm.storage.warehouse import FLOW_STATES

    rows = env.warehouse.read(FLOW_STATES, flow=env.flow().name)
    return max(rows, key=lambda r: r["since"])["state"] if rows else None


def exactly_once(env: Env, topic: str) -> dict[str, int]:
    """Every source record of ``topic`` once on the target, in order."""
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    expected = {p: [seq_of(r) for r in records] for p, records in contents(env.west, topic).items()}
    return sequence_report(contents(env.east, remote), expected)


class Run(threading.Thread):
    """One available-now run in the background: the error it ended with, and when."""

    def __init__(self, spark: Any, env: Env) -> None:
        super().__init__(daemon=True)
        self.spark, self.env = spark, env
        self.error: BaseException | None = None
        self.ended = 0.0

    def run(self) -> None:
        try:
            replicate(self.spark, self.env)
        except BaseException as exc:
            self.error = exc
        finally:
            self.ended = time.monotonic()


def test_a_target_frozen_past_the_bound_fails_the_run_naming_it_then_the_next_run_resumes_exactly(
    spark: Any, kafka: SrmConfig, freezable: LocalClusters, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("frozen")
    flow = {"source": "west", "target": "east", "topics": [topic], "errors.retry.timeout": BOUND_MS}
    env = make_env(kafka, tmp_path, [flow], east=bootstrap(freezable))
    ensure_topic(clients.admin_client(env.west), topic, 2)
    for start in range(0, 400_000, 50_000):  # in chunks: the producer's queue holds 100,000
        produce(env.west, topic, sequenced(2, 50_000, start=start, size=16))
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    target_admin = clients.admin_client(env.east)

    def copying() -> bool:
        if remote not in clients.admin_client(env.east).list_topics(timeout=5).topics:
            return False
        return sum(list_offsets(target_admin, [(remote, 0), (remote, 1)], "latest").values()) > 10_000

    run = Run(spark, env)
    run.start()
    pid = broker_pid(freezable)
    try:
        wait_for(copying, 120, "copying")
        os.kill(pid, signal.SIGSTOP)
        frozen = time.monotonic()
        run.join(BOUND_MS / 1000 + 150)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not run.is_alive(), "the run went on past its bound with the target frozen"
    failed_after = run.ended - frozen
    # delivery time-out (the bound) + the bound from that first failure + the failed run's close
    assert failed_after < 3 * BOUND_MS / 1000 + 30, f"failed {failed_after:.0f} s after the freeze"
    assert isinstance(run.error, LastingFaultError), run.error
    message = str(run.error)
    assert f"writing to {env.east.alias} ({bootstrap(freezable)})" in message, message
    assert f"copying {topic}[0] at offset " in message and "failing since " in message, message
    assert f"errors.retry.timeout ({BOUND_MS} ms)" in message and "resumes from its committed progress" in message

    for where, (state, reason) in shown_status(env).items():
        assert state == "failed" and reason.startswith("the run failed: flow "), (where, state, reason)
        assert f"writing to {env.east.alias}" in reason, (where, reason)

    replicate(spark, env)  # the cause is gone: the next run goes on from the committed progress
    # Every record once. A read_committed consumer reads a partition up to its first open
    # transaction: one the frozen run left open (its producer could neither commit nor abort) ends
    # when the next run's fencing, or the broker after transaction.timeout.ms (2 minutes), aborts it.
    deadline = time.monotonic() + 150
    while (report := exactly_once(env, topic)) != CLEAN:
        if time.monotonic() > deadline:
            keys = [(remote, 0), (remote, 1)]
            stable, end = (list_offsets(target_admin, keys, "latest", read_committed=c) for c in (True, False))
            held = {f"{t}[{p}]": (stable[(t, p)], end[(t, p)]) for t, p in keys}
            raise AssertionError(f"not every record once on the target 150 s after the run: {report}; LSO, end: {held}")
        time.sleep(1)


def test_a_topic_the_target_refuses_fails_the_run_and_once_out_of_the_flow_the_others_copy(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], caplog: pytest.LogCaptureFixture
) -> None:
    refused, other = unique("refused"), unique("other")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [refused, other]}])
    west = clients.admin_client(env.west)
    for topic in (refused, other):
        ensure_topic(west, topic, 1)
    # The remote topic takes no record older than a minute; the source's records are a day old.
    remote = env.flow().policy.format_remote_topic(env.west.alias, refused)
    ensure_topic(clients.admin_client(env.east), remote, 1, config={"message.timestamp.before.max.ms": "60000"})
    old = int((datetime.now(UTC) - timedelta(days=1)).timestamp() * 1000)
    produce(env.west, refused, [{**r, "timestamp": old} for r in sequenced(1, 50)])
    produce(env.west, other, sequenced(1, 50))

    started = time.monotonic()
    with pytest.raises(ReplicationError) as failed:
        replicate(spark, env)
    assert time.monotonic() - started < 120
    message = str(failed.value)
    assert f"'{refused}' partition 0 offset 0" in message and "INVALID_TIMESTAMP" in message, message
    assert "message.timestamp.before.max.ms" in message, message
    for where, (state, reason) in shown_status(env).items():
        assert state == "failed" and f"cannot write '{remote}' partition 0" in reason, (where, state, reason)

    env.rewrite(topics=[other])  # the user takes the refusing topic out of the flow
    produce(env.west, other, sequenced(1, 50, start=50))
    with caplog.at_level("WARNING", logger="srm.replicate"):
        replicate(spark, env)
    assert any(f"without {refused}, no longer in the flow" in r.getMessage() for r in caplog.records)
    assert exactly_once(env, other) == CLEAN
    assert sum(len(r) for r in contents(env.east, remote).values()) == 0, "the refused topic was not retried"


def test_a_continuous_flow_told_to_wait_shows_waiting_for_its_frozen_target_then_goes_on_exactly(
    spark: Any, kafka: SrmConfig, freezable: LocalClusters, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("waits")
    flow = {"source": "west", "target": "east", "topics": [topic], "errors.retry.timeout": -1, "task.lease.seconds": 10}
    env = make_env(kafka, tmp_path, [flow], east=bootstrap(freezable))
    ensure_topic(clients.admin_client(env.west), topic, 2)
    writer = Writer(env.west, topic, 2, burst=20)  # 1,000 records/s
    writer.start()
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    pid = broker_pid(freezable)
    try:
        wait_for(lambda: target_records(env, topic) > 1000, 120, "copying")
        os.kill(pid, signal.SIGSTOP)
        try:
            # The bound is -1: past the time other flows would fail (BOUND_MS), the flow still waits,
            # and says for what and since when.
            wait_for(lambda: newest_state(env) == "waiting", 300, "the run recording that it waits")
            for where, (state, reason) in shown_status(env).items():
                assert state == "waiting" and reason.startswith(f"waiting for {env.east.alias} since "), (where, reason)
            assert run.loop.is_alive() and run.loop.error is None, run.loop.error
        finally:
            os.kill(pid, signal.SIGCONT)
        sent = writer.stop()
        wait_for(lambda: target_records(env, topic) >= sent, 180, "copying after the target came back")
        # No longer waiting (this test emits no heartbeats, which "running" needs).
        wait_for(lambda: all(s not in ("waiting", "failed") for s, _ in shown_status(env).values()), 60, "wait over")
    finally:
        writer.stop()
        run.stop()
    assert exactly_once_sent(env, topic, sent, 2) == CLEAN


def test_a_remote_topic_deleted_under_a_run_ends_it_then_the_flow_stops_or_goes_on_as_on_data_loss_says(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    import pyarrow.compute as pc

    from srm.replication.progress import read_flow_progress
    from srm.storage.warehouse import DATA_LOSS, SYNC_HISTORY

    topic = unique("gone")
    # Records of a deleted topic fail as unknown, or time out (after the bound) and the target is asked.
    flow = {
        "source": "west",
        "target": "east",
        "topics": [topic],
        "task.lease.seconds": 10,
        "errors.retry.timeout": BOUND_MS,
    }
    env = make_env(kafka, tmp_path, [flow])
    ensure_topic(clients.admin_client(env.west), topic, 2)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    target_admin = clients.admin_client(env.east)
    writer = Writer(env.west, topic, 2, burst=20)  # 1,000 records/s
    writer.start()
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    try:
        wait_for(lambda: target_records(env, topic) > 1000, 120, "copying")
        for future in target_admin.delete_topics([remote]).values():
            future.result(30)
        deleted = time.monotonic()
        wait_for(lambda: not run.loop.is_alive(), 120, "the run ending")
        ended = time.monotonic() - deleted
    finally:
        sent = writer.stop()
        if run.loop.is_alive():
            run.stop()
    with pytest.raises(LastingFaultError) as failed:
        run.wait()
    failure = str(failed.value)
    assert f"remote topic '{remote}' partition " in failure and f"is gone from {env.east.alias}" in failure, failure
    assert ended < 90, f"the run ended {ended:.0f} s after the deletion"

    # The next run finds it gone: with on_data_loss: fail (the default) the flow stops, saying what
    # was lost where and what to do.
    with pytest.raises(DataLossError) as stopped:
        replicate(spark, env)
    message = str(stopped.value)
    assert f"remote topic '{remote}' (of '{topic}', copied up to offset(s) [0] " in message, message
    assert f"deleted from {env.east.alias} after the flow copied into them" in message, message
    assert "Set on_data_loss: continue for this flow to create them again" in message, message
    for where, (state, reason) in shown_status(env).items():
        assert state == "failed" and f"remote topic '{remote}'" in reason, (where, state, reason)
    assert remote not in clients.admin_client(env.east).list_topics(timeout=10).topics, "created again under fail"

    # With on_data_loss: continue it is created again and the copy goes on from the committed progress.
    progress = read_flow_progress(env.east, env.flow(), [(topic, 0), (topic, 1)])
    env.rewrite(on_data_loss="continue")
    replicate(spark, env)
    expected = {p: list(range(progress[(topic, p)].next_offset * 2 + p, sent, 2)) for p in (0, 1)}
    assert sequence_report(contents(env.east, remote), expected) == CLEAN
    lost = env.warehouse.read(DATA_LOSS, topic=topic)
    assert {(r["partition"], r["end_offset"]) for r in lost} == {(p, progress[(topic, p)].next_offset) for p in (0, 1)}
    assert all(f"when remote topic '{remote}' was deleted" in r["reason"] for r in lost), lost
    # The sync history holds only runs into the new remote topic: translation never maps to the old one.
    runs = env.warehouse.scan(SYNC_HISTORY, (pc.field("flow") == env.flow().name) & (pc.field("topic") == topic))
    for row in runs.to_pylist():
        assert row["source_first"] >= progress[(topic, row["partition"])].next_offset, row
