"""Reading the progress of a flow whose progress records are journaled, on a real target.

Continuous mode writes a partition's progress record only every few seconds; the history records
of the transactions in between hold the position (srm.replication.progress). These records are
written here by hand, in transactions, to pin what the reader makes of each case; the copier
writing them is covered by the continuous-mode and fault tests, which count duplicates.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.config.model import Flow
from srm.kafka import clients
from srm.kafka.internal_topics import (
    ensure_internal_topic,
    flow_internal_topics,
    history_topic,
    history_topic_name,
    progress_topic_name,
)
from srm.kafka.partitions import HELD_S, list_offsets
from srm.kafka.topics import broker_count, ensure_topic, partition_counts
from srm.mm2.records import OPENER_HEADERS, OffsetRunsRecord, ProgressRecord
from srm.replication.job import copy_transactional_ids
from srm.replication.journal import PROGRESS_EVERY_S
from srm.replication.ownership import fence_producers
from srm.replication.progress import Progress, progress_group, read_flow_progress, read_progress
from tests.helpers import produce
from tests.integration.test_replicate_continuous import latest_progress, target_records, wait_for
from tests.integration.test_replicate_failures import delete_records
from tests.jobs import Job, Writer, exactly_once
from tests.replication import Env, make_env, sequenced

pytestmark = pytest.mark.integration
Record = tuple[str, Any, list[Any] | None]


class Slot:
    """A transactional writer of the flow's history and progress, as a copier's slot is."""

    def __init__(self, env: Env, name: str) -> None:
        self.acked: list[int] = []  # history offsets, as a copier learns them: from acknowledgements
        self.producer = clients.producer(
            env.east, **{"transactional.id": name, "on_delivery": lambda _, m: self.acked.append(m.offset())}
        )
        self.producer.init_transactions(30)

    def begin(self, *records: Record) -> None:
        self.producer.begin_transaction()
        for name, record, headers in records:
            self.producer.produce(name, headers=headers, **record.as_produce_kwargs())
        self.producer.flush(30)

    def transaction(self, *records: Record, commit: bool = True) -> None:
        self.begin(*records)
        if commit:
            self.producer.commit_transaction(30)
        else:
            self.producer.abort_transaction(30)


def flow_env(kafka: SrmConfig, tmp_path: Path, topic: str) -> tuple[Env, Flow]:
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    flow = env.flow()
    for internal in flow_internal_topics(flow):
        admin = clients.admin_client(env.config.cluster(internal.cluster))
        ensure_internal_topic(admin, internal, broker_count(admin))
    return env, flow


def records_of(flow: Flow, topic: str) -> tuple[Callable[..., Record], Callable[..., Record], Callable[..., Record]]:
    history, progress = history_topic_name(flow), progress_topic_name(flow)

    def runs(partition: int, next_offset: int) -> Record:
        return history, OffsetRunsRecord(topic, partition, "id", next_offset, ((next_offset - 1, 0, 1),)), None

    def position(partition: int, next_offset: int, history_from: int = -1) -> Record:
        return progress, ProgressRecord(topic, partition, "id", next_offset, history_from), None

    def opener(partition: int, next_offset: int) -> Record:
        return history, OffsetRunsRecord(topic, partition, "id", next_offset, ()), OPENER_HEADERS

    return runs, position, opener


def test_journaled_progress_is_taken_from_the_latest_committed_history_record(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("journal")
    env, flow = flow_env(kafka, tmp_path, topic)
    runs, position, opener = records_of(flow, topic)
    slot = Slot(env, unique("journal-writer"))

    slot.transaction(runs(2, 99))  # before partition 2's journaled record: not its position
    mark = slot.acked[-1] + 1
    slot.transaction(position(0, 10, mark), runs(0, 10), position(1, 5), position(2, 40, mark))
    slot.transaction(runs(0, 20), runs(1, 7))  # partition 1's latest progress is plain: the last word
    slot.transaction(runs(0, 30), commit=False)  # aborted: never the position
    slot.transaction(opener(0, 25))  # only opens a transaction: not a position

    found = read_flow_progress(env.east, flow, [(topic, p) for p in range(4)])
    assert found == {
        (topic, 0): Progress(20, "id", journaled=True),
        (topic, 1): Progress(5, "id"),
        (topic, 2): Progress(40, "id", journaled=True),
    }


def test_the_read_waits_for_a_transaction_of_another_slot_open_when_it_began(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """Another slot's open transaction holds the history's last stable offset back; the records
    committed after it began are the position all the same."""
    topic = unique("journal-open")
    env, flow = flow_env(kafka, tmp_path, topic)
    runs, position, opener = records_of(flow, topic)
    other, slot = Slot(env, unique("other-slot")), Slot(env, unique("slot"))

    slot.transaction(runs(1, 5))
    mark = slot.acked[-1] + 1
    slot.transaction(position(0, 10, mark), runs(0, 10))
    other.begin(opener(2, 0))  # open, as a busy slot's transaction is most of the time
    slot.transaction(runs(0, 20))  # committed after the other's began: past the last stable offset
    ends = threading.Timer(2.0, lambda: other.producer.commit_transaction(30))
    ends.start()
    try:
        found = read_flow_progress(env.east, flow, [(topic, 0)])
    finally:
        ends.join()
    assert found == {(topic, 0): Progress(20, "id", journaled=True)}


def test_a_transaction_left_open_by_a_dead_slot_is_fenced_by_the_read_it_holds(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """A copier that died with its Python worker leaves its transaction open until the broker's
    time-out (60 s for this producer, 2 minutes for a copier's), holding the history's last stable
    offset. The read it holds calls ``on_held`` once after HELD_S; the copier fences the other
    slots' producers there, and the records committed after the dead transaction began are read
    long before the time-out. The dead transaction's records are aborted: never a position."""
    topic = unique("journal-dead")
    env, flow = flow_env(kafka, tmp_path, topic)
    runs, position, opener = records_of(flow, topic)
    dead_id = unique("dead-slot")
    dead, slot = Slot(env, dead_id), Slot(env, unique("slot"))

    slot.transaction(runs(1, 5))
    mark = slot.acked[-1] + 1
    slot.transaction(position(0, 10, mark), runs(0, 10))
    dead.begin(opener(0, 10), runs(0, 99))  # never committed: its process is gone
    slot.transaction(runs(0, 20))  # committed after the dead one began: past the last stable offset
    held: list[float] = []

    def fence() -> None:
        held.append(time.monotonic())
        fence_producers(env.east, [dead_id])

    consumer = clients.reader(env.east, progress_group(flow.source))
    started = time.monotonic()
    try:
        found = read_progress(consumer, clients.admin_client(env.east), flow, [(topic, 0)], on_held=fence)
    finally:
        consumer.close()
    took = time.monotonic() - started
    assert found == {(topic, 0): Progress(20, "id", journaled=True)}
    assert len(held) == 1 and held[0] - started > HELD_S, held
    assert took < HELD_S + 20, f"the read took {took:.1f} s: the dead transaction was not fenced"


def test_a_journaled_record_naming_a_gone_history_is_reported(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], caplog: pytest.LogCaptureFixture
) -> None:
    """A history offset beyond the history's end: the topic was deleted and created again after
    the record was written. The record's own offset is all that is left, and the reader says so."""
    topic = unique("journal-gone")
    env, flow = flow_env(kafka, tmp_path, topic)
    runs, position, _ = records_of(flow, topic)
    slot = Slot(env, unique("journal-writer"))
    slot.transaction(runs(1, 3))
    slot.transaction(position(0, 10, 5_000), runs(0, 10))

    found = read_flow_progress(env.east, flow, [(topic, 0)])
    assert found == {(topic, 0): Progress(10, "id", journaled=True)}
    assert f"spans offsets 0 up to 4, which misses the history the progress of {topic}[0] from offset 5000" in (
        caplog.text
    )


def test_a_partition_blocked_by_a_loss_keeps_its_position_in_a_plain_record(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """A job killed under load leaves a journaled progress record; records it never copied are
    then deleted at the source. The next start stops on the loss (on_data_loss: fail) and writes
    the position before the loss as a plain record: it no longer depends on the history, which
    retention deletes in time, so the loss is reported the same way at every later start."""
    topic = unique("journal-loss")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "tasks.max": 1}])
    ensure_topic(clients.admin_client(env.west), topic, 1)
    writer = Writer(env.west, topic, 1, burst=100)
    writer.start()
    job = Job(env.path, env.west.alias, env.east.alias, tmp_path / "job.log")
    try:
        wait_for(lambda: target_records(env, topic) > 0, 120, "copying")
        time.sleep(2 * PROGRESS_EVERY_S + 1)
        epoch = int(job.wait_for(r"owns epoch (\d+)").group(1))
        job.kill()
    finally:
        sent = writer.stop()
    # The killed copier's open transaction holds the history's end back until it is aborted: as
    # the next run's fencing would, now.
    fence_producers(env.east, list(copy_transactional_ids(env.flow(), epoch, 0)))
    produce(env.west, topic, sequenced(1, 50, start=sent))  # never copied: the job is gone
    sent += 50
    assert latest_progress(env, topic)[0].journaled
    position = read_flow_progress(env.east, env.flow(), [(topic, 0)])[(topic, 0)].next_offset
    delete_records(env.west, topic, 0, sent)  # as retention would

    again = Job(env.path, env.west.alias, env.east.alias, tmp_path / "again.log")
    assert again.process.wait(180) != 0, again.text()[-3000:]
    assert f"offsets {position}..{sent - 1} ({sent - position} record(s)) were removed" in again.text()
    latest = latest_progress(env, topic)[0]
    assert (latest.next_offset, latest.journaled) == (position, False)


def test_a_history_topic_recreated_under_a_running_copier_leaves_every_position_exact(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """The history topic deleted and created again while a job copies under load: its offsets
    start over, below the history offset the journaled progress records name, and a reader would
    take those records' own, older, offsets as the position. The copier's first transaction on
    the new topic writes plain progress records: it sees the restart in its acknowledgements, or,
    when the deletion failed a transaction and the producer was dropped, its new writer restates
    what it cannot vouch for. The job is killed right after that commit (the journaled records
    are rewritten every 2 s: a copier without the restatement leaves stale ones that long) and
    started again: every record is on the target exactly once."""
    topic = unique("journal-history")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "tasks.max": 1}])
    flow = env.flow()
    ensure_topic(clients.admin_client(env.west), topic, 2)
    admin = clients.admin_client(env.east)
    history = history_topic(flow)

    def history_end() -> int:
        """The history's last stable offset: past every committed transaction."""
        if history.name not in partition_counts(admin, include_internal=True):
            return 0  # deleted, or not created yet
        return list_offsets(admin, [(history.name, 0)], "latest")[(history.name, 0)]

    writer = Writer(env.west, topic, 2, burst=100)
    writer.start()
    job = Job(env.path, env.west.alias, env.east.alias, tmp_path / "job.log")
    try:
        wait_for(lambda: history_end() >= 1000, 120, "a history of 1,000 offsets")
        assert latest_progress(env, topic)[0].journaled
        for future in admin.delete_topics([history.name]).values():
            future.result(30)
        deadline = time.monotonic() + 30
        while not ensure_internal_topic(admin, history, broker_count(admin)):  # deletion is asynchronous
            assert time.monotonic() < deadline, "the history topic could not be created again"
            time.sleep(0.1)
        wait_for(lambda: history_end() > 0, 60, "a transaction committed on the new history")
        epoch = int(job.wait_for(r"owns epoch (\d+)").group(1))
        job.kill()
    finally:
        sent = writer.stop()
    fence_producers(env.east, list(copy_transactional_ids(flow, epoch, 0)))
    end = history_end()
    assert all(r.history_from <= end for r in latest_progress(env, topic).values()), "a record names a gone history"

    again = Job(env.path, env.west.alias, env.east.alias, tmp_path / "again.log")
    try:
        wait_for(lambda: target_records(env, topic) >= sent, 180, "copying the rest")
        time.sleep(2)  # a duplicate would come with the first transactions after the restart
    finally:
        assert again.stop() == 0, again.text()[-3000:]
    assert exactly_once(env, topic, sent, 2) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
