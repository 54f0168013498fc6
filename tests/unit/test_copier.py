"""The copy loop without a broker: where a partition starts (srm.replication.losses), and the loop
between a pretend source log (a fake consumer handed in through the client cache, with gaps where
the source has commit markers) and the fake transactional producers of test_writer: records go
p -> p with key, value, headers and timestamp, an aborted transaction is read again from the
committed progress and lands once, an end-of-partition event finishes an available-now range and
records removed by retention under the copy are a loss with their exact range."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError

from srm.replication import copier, drain, source_reader
from srm.replication.copier import CopyLoop, commit_or_rewind
from srm.replication.job import OPEN_END, CopyJob, CopyRange, Loss
from srm.replication.losses import RETENTION, starting_point
from srm.replication.progress import Progress
from tests.unit.test_writer import REMOTE, FakeCache, FakeProducer, Message, job, visible

KEY = ("t", 0)


# --- where a partition starts -----------------------------------------------------------------
def test_a_partition_resumes_at_its_committed_progress_and_else_where_the_plan_starts() -> None:
    r = CopyRange("t", 0, 5, 100, "id-1", REMOTE)
    assert starting_point(r, None, 0) == (5, [])
    assert starting_point(r, Progress(42, "id-1"), 0) == (42, [])
    assert starting_point(r, Progress(42, ""), 10) == (42, []), "an unknown topic id is not a recreation"


def test_records_retention_removed_before_they_were_copied_are_a_loss_of_their_exact_range() -> None:
    r = CopyRange("t", 0, 0, OPEN_END, "id-1", REMOTE)
    assert starting_point(r, Progress(42, "id-1"), 60) == (60, [Loss("t", 0, 42, 60, RETENTION)])
    assert starting_point(r, None, 7) == (7, [Loss("t", 0, 0, 7, RETENTION)])


def test_a_recreated_topic_is_always_a_loss_and_copying_starts_at_the_new_logs_start() -> None:
    # available-now: the last plan had the old topic's records up to 60; the new topic's log starts at 0
    planned = CopyRange("t", 0, 60, 90, "id-2", REMOTE)
    start, losses = starting_point(planned, Progress(30, "id-1"), 0)
    assert start == 0
    assert [(x.first, x.end) for x in losses] == [(30, 60)]
    assert "deleted and recreated (topic id id-1 -> id-2" in losses[0].reason
    continuous = CopyRange("t", 0, 0, OPEN_END, "id-2", REMOTE)
    start, losses = starting_point(continuous, Progress(30, "id-1"), 3)
    assert start == 3
    assert [(x.first, x.end) for x in losses] == [(30, 30)], "no planned range: what the old topic held is unknown"


# --- the loop ---------------------------------------------------------------------------------
class SourceMessage(Message):
    def __init__(self, offset: int, *, error: KafkaError | None = None) -> None:
        super().__init__("t", 0, offset, b"k%d" % offset, b"v%d" % offset, [("h", b"%d" % offset)])
        self._error = error

    def error(self) -> KafkaError | None:
        return self._error

    def timestamp(self) -> tuple[int, int]:
        return (1, 1_000 + self._offset)


class FakeConsumer:
    """A read_committed consumer of one pretend source partition: its records at ``offsets`` (the
    gaps are commit markers and aborted records), an end-of-partition event when caught up."""

    def __init__(self, offsets: list[int], end: int) -> None:
        self.log = {o: SourceMessage(o) for o in offsets}
        self.end, self.log_start = end, 0
        self.position: dict[tuple[str, int], int] = {}
        self.paused: set[tuple[str, int]] = set()
        self.seeks: list[int] = []

    def assign(self, tps: list[Any]) -> None:
        self.position = {(tp.topic, tp.partition): tp.offset for tp in tps}

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return SimpleNamespace(topics={})  # the fake knows no metadata: nothing is learnt

    def incremental_assign(self, tps: list[Any]) -> None:
        self.position.update({(tp.topic, tp.partition): tp.offset for tp in tps})

    def incremental_unassign(self, tps: list[Any]) -> None:
        for tp in tps:
            self.position.pop((tp.topic, tp.partition))

    def unassign(self) -> None:
        self.position = {}

    def assignment(self) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition(t, p) for t, p in self.position]

    def resume(self, tps: list[Any]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in tps}

    def pause(self, tps: list[Any]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in tps}

    def seek(self, tp: Any) -> None:
        self.position[(tp.topic, tp.partition)] = tp.offset
        self.seeks.append(tp.offset)

    def consume(self, count: int, timeout: float = 0) -> list[Any]:
        if KEY not in self.position or KEY in self.paused:
            return []
        at = self.position[KEY]
        if at < self.log_start:
            self.position[KEY] = self.end + 1  # once
            return [SourceMessage(at, error=KafkaError(KafkaError._AUTO_OFFSET_RESET))]
        if at >= self.end:
            self.position[KEY] = self.end + 1  # one event per catching up
            return [SourceMessage(self.end, error=KafkaError(KafkaError._PARTITION_EOF))] if at == self.end else []
        messages = [self.log[o] for o in range(at, self.end) if o in self.log][:count]
        self.position[KEY] = self.end
        return messages

    def poll(self, timeout: float = 0) -> Any:
        messages = self.consume(1)
        return messages[0] if messages else None


class SourceCache(FakeCache):
    """test_writer's client cache, with the slot's source consumer and producers that keep the
    timestamps they were given."""

    def __init__(self, consumer: FakeConsumer) -> None:
        super().__init__()
        self.consumer = consumer
        self.timestamps: list[int] = []

    def producer(self, key: str, build: Any, digest: str = "") -> Any:
        routed = super().producer(key, build, digest)
        fake: FakeProducer = self.producers[key]
        produce = fake.produce

        def keep_timestamp(topic: str, value: Any = None, **kw: Any) -> None:
            if topic == REMOTE:
                self.timestamps.append(kw["timestamp"])
            produce(topic, value, **kw)

        fake.produce = keep_timestamp  # type: ignore[method-assign]
        return routed

    def client(self, key: Any, build: Any, digest: str = "") -> Any:
        return self.consumer if key[0] == "source-consumer" else super().client(key, build, digest)


@pytest.fixture
def no_broker(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The target's ownership and progress records and the source's log-start offsets, as given."""
    given: dict[str, Any] = {"progress": {}, "log_start": 0}
    monkeypatch.setattr(copier, "latest_ownership", lambda *a, **k: (None, 0))
    monkeypatch.setattr(copier, "read_progress", lambda *a: given["progress"])
    monkeypatch.setattr(
        source_reader, "list_offsets", lambda admin, keys, spec: dict.fromkeys(keys, given["log_start"])
    )
    return given


def available_now(end: int) -> CopyJob:
    from dataclasses import replace

    base = job(continuous=False)
    return replace(base, ranges=(CopyRange("t", 0, 0, end, "id-1", REMOTE),))


def copied(cache: SourceCache) -> list[tuple[int, bytes | None, bytes | None, Any]]:
    return [(m.offset(), m.key(), m.value(), m.headers()) for m in visible(cache) if m.topic() == REMOTE]


def test_records_go_partition_for_partition_with_key_value_headers_and_timestamp(no_broker: dict[str, Any]) -> None:
    consumer = FakeConsumer([0, 1, 2, 4, 5], end=7)  # 3 and 6: commit markers on the source
    cache = SourceCache(consumer)
    loop = CopyLoop(available_now(7), cache)  # type: ignore[arg-type]
    loop.add(loop.job.ranges)
    while loop.remaining:
        assert loop.step(0.0), "the fake source always has something to say until the range is finished"
    assert commit_or_rewind(loop)
    assert [(k, v, h) for _, k, v, h in copied(cache)] == [
        (b"k%d" % o, b"v%d" % o, [("h", b"%d" % o)]) for o in (0, 1, 2, 4, 5)
    ]
    assert cache.timestamps == [1_000 + o for o in (0, 1, 2, 4, 5)]
    (result,) = loop.results()
    assert (result.next_offset, result.records) == (7, 5), "the trailing marker is covered by the progress"
    assert consumer.paused == {KEY}, "a finished partition is paused, not read on"


def test_an_aborted_transaction_is_read_again_from_the_committed_progress_and_lands_once(
    no_broker: dict[str, Any],
) -> None:
    no_broker["progress"] = {KEY: Progress(2, "id-1")}  # 0 and 1 were copied by an earlier task
    consumer = FakeConsumer([0, 1, 2, 3, 4], end=5)
    cache = SourceCache(consumer)
    loop = CopyLoop(available_now(5), cache)  # type: ignore[arg-type]
    loop.add(loop.job.ranges)
    assert consumer.position[KEY] == 2, "the target's progress, not the plan, decides where copying resumes"
    while loop.remaining:
        loop.step(0.0)
    loop.writer.producer.fail_delivery[REMOTE] = KafkaError(KafkaError._MSG_TIMED_OUT)
    assert not commit_or_rewind(loop)
    assert consumer.seeks == [2] and KEY in loop.remaining and KEY not in consumer.paused
    assert copied(cache) == []
    loop.writer.producer.fail_delivery.clear()
    while loop.remaining:
        loop.step(0.0)
    assert commit_or_rewind(loop)
    assert [v for _, _, v, _ in copied(cache)] == [b"v2", b"v3", b"v4"]
    (result,) = loop.results()
    assert (result.next_offset, result.records, result.transactions, result.aborted) == (5, 3, 1, 1)
    assert result.row()["aborted"] == 1  # the metrics row, and the monitor's transactions-aborted count


@pytest.mark.parametrize("on_data_loss", ["continue", "fail"])
def test_records_removed_by_retention_while_being_read_are_a_loss_of_their_exact_range(
    no_broker: dict[str, Any], on_data_loss: str
) -> None:
    from dataclasses import replace

    consumer = FakeConsumer([0, 1, 2, 3, 4, 5], end=6)
    cache = SourceCache(consumer)
    copy_job = available_now(6)
    settings = copy_job.flow.settings.model_copy(update={"on_data_loss": on_data_loss})
    flow = copy_job.flow.model_copy(update={"settings": settings})
    loop = CopyLoop(replace(copy_job, flow=flow), cache)  # type: ignore[arg-type]
    loop.add(loop.job.ranges)
    consumer.log_start = no_broker["log_start"] = 4  # retention ran between the plan and the first fetch
    while loop.remaining:
        loop.step(0.0)
    assert commit_or_rewind(loop)
    (result,) = loop.results()
    assert [(x.first, x.end, x.reason) for x in result.losses] == [(0, 4, RETENTION)]
    if on_data_loss == "continue":  # goes on after the loss
        assert consumer.seeks == [4]
        assert [v for _, _, v, _ in copied(cache)] == [b"v4", b"v5"]
        assert result.next_offset == 6
    else:  # the partition stops where its progress is, for the driver to fail the flow with the range
        assert consumer.seeks == [] and copied(cache) == []
        assert loop.blocked and result.next_offset == 0


def test_a_target_that_times_out_every_delivery_ends_the_copy_at_the_bound_with_the_partitions_and_the_cause(
    no_broker: dict[str, Any],
) -> None:
    from srm.errors import LastingFaultError
    from srm.replication.drain import copy_to_end
    from srm.replication.outage import Outage

    no_broker["progress"] = {KEY: Progress(2, "id-1")}
    consumer = FakeConsumer([0, 1, 2, 3, 4], end=5)
    cache = SourceCache(consumer)
    copy_job = available_now(5)
    outage = Outage(clock=lambda: 30.0 * outage.failures)  # each failed attempt 30 s after the one before
    cache.kept[("outage", copy_job.flow.name, "0")] = outage
    refusing = KafkaError(KafkaError._MSG_TIMED_OUT)
    build = cache.producer

    def refusing_producer(key: str, make: Any, digest: str = "") -> Any:
        routed = build(key, make, digest)
        cache.producers[key].fail_delivery[REMOTE] = refusing
        return routed

    cache.producer = refusing_producer  # type: ignore[method-assign]
    with pytest.raises(LastingFaultError) as failed:
        copy_to_end(copy_job, cache)  # type: ignore[arg-type]
    message = str(failed.value)
    assert "copying t[0] at offset 2 from" in message, message  # where its committed progress is
    # The first timed-out record had waited its delivery time-out (120 s) already: 120 + 6 x 30 s.
    assert "(300 s, 7 attempt(s))" in message and "Message timed out" in message
    assert copied(cache) == [], "nothing was committed"
    assert consumer.seeks == [2] * 6, "each attempt read the records again from the committed progress"


def test_a_transaction_that_fails_while_records_are_produced_is_aborted_counted_and_read_again(
    no_broker: dict[str, Any],
) -> None:
    from srm.replication.deliveries import TransactionAborted

    no_broker["progress"] = {KEY: Progress(2, "id-1")}
    consumer = FakeConsumer([0, 1, 2, 3, 4], end=5)
    cache = SourceCache(consumer)
    loop = CopyLoop(available_now(5), cache)  # type: ignore[arg-type]
    loop.add(loop.job.ranges)

    def refused(messages: list[Any]) -> None:  # as produce() raising after the transaction failed
        raise TransactionAborted("Local: Message timed out", 1.0)

    loop._handle = refused  # type: ignore[method-assign]
    assert loop.step(0.0) == 3
    assert loop.writer.outage.failures == 1 and loop.writer.outage.ongoing
    assert consumer.seeks == [2] and KEY in loop.remaining, "read again from the committed progress"


def test_a_slot_hands_its_lasting_fault_to_the_driver_with_what_it_committed_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from srm.errors import LastingFaultError
    from srm.replication.job import PartitionResult, split_faults

    committed = PartitionResult("t", 0, REMOTE, 5, next_offset=3, records=3)

    def failing(job: Any, cache: Any = None, faults: list[LastingFaultError] | None = None) -> list[Any]:
        assert faults is not None, "run_slot asks for the fault, not a raise (no Spark retry)"
        faults.append(LastingFaultError("flow a->b: ... failing since T"))
        return [committed]

    monkeypatch.setattr(drain, "copy_to_end", failing)
    payloads, fault = split_faults(drain.run_slot(available_now(5)))
    assert fault == "flow a->b: ... failing since T"
    assert [p["row"]["next_offset"] for p in payloads] == [3], "the chunks committed before it are accounted"
