"""The target writer's transactions without a broker: its producers are handed in through the
client cache (fakes that acknowledge on flush, give offsets per partition and take a commit marker
per partition a transaction touched), so commit, abort and fencing are checked on what reaches the
target: records, history runs, progress records."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from srm.mm2.records import OffsetRunsRecord, ProgressRecord, is_opener
from srm.replication.deliveries import TransactionAborted
from srm.replication.job import OPEN_END, CopyJob, CopyRange, Lease, PartitionResult
from srm.replication.kafka_errors import ProducerFencedError
from srm.replication.partition_state import PartitionState
from srm.replication.producers import RoutedProducer, Router
from srm.replication.writer import TargetWriter
from tests.unit.test_ownership import flow

HISTORY, PROGRESS, REMOTE = "srm-offset-syncs.a.internal", "srm-offsets.a.internal", "a.t"


@dataclass
class Message:
    _topic: str
    _partition: int
    _offset: int
    _key: bytes | None
    _value: bytes | None
    _headers: Any = None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> Any:
        return self._headers


class FakeProducer:
    """A transactional producer on a pretend target: offsets per partition, one commit marker per
    partition a transaction touched, its records visible once committed."""

    def __init__(self, delivered: Any, offsets: dict[tuple[str, int], int], visible: list[list[Message]]) -> None:
        self.delivered = delivered  # the producer-wide delivery callback
        self.offsets = offsets  # shared by both producers of a slot: one target
        self.visible = visible  # committed transactions, in commit order (shared too)
        self.pending: list[tuple[Any, Message]] = []
        self.open: list[Message] = []
        self.aborted = 0
        self.fail_delivery: dict[str, KafkaError] = {}  # topic -> error of its records
        self.fail_commit: KafkaException | None = None
        # A transaction that failed with an abortable error before it added the partition of its
        # queued records: they wait (for their delivery time-out) until purged.
        self.failed: KafkaError | None = None
        self.purged = 0
        # topic -> metadata requests before the producer knows its partitions (a remote topic grew
        # after the producer's metadata was taken)
        self.stale: dict[str, int] = {}
        self.lookups = 0

    def produce(self, topic: str, value: Any = None, key: Any = None, partition: int = 0, **kw: Any) -> None:
        if self.stale.get(topic, 0) > 0:
            raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION, "Local: Unknown partition"))
        where = (topic, partition)
        message = Message(topic, partition, self.offsets[where], key, value, kw.get("headers"))
        self.offsets[where] += 1
        self.open.append(message)
        self.pending.append((kw.get("on_delivery") or self.delivered, message))

    def flush(self, timeout: float = 0) -> int:
        if self.failed is not None:
            return len(self.pending)
        pending, self.pending = self.pending, []
        for callback, message in pending:
            callback(self.fail_delivery.get(message.topic()), message)
        return 0

    def poll(self, timeout: float = 0) -> int:
        return 0

    def list_topics(self, topic: str, timeout: float = -1) -> Any:
        from types import SimpleNamespace

        self.lookups += 1
        self.stale[topic] = self.stale.get(topic, 0) - 1
        partitions = {} if self.stale[topic] > 0 else {0: object()}
        return SimpleNamespace(topics={topic: SimpleNamespace(error=None, partitions=partitions)})

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        pending, self.pending = self.pending, []
        self.purged += len(pending)
        for callback, message in pending:
            callback(KafkaError(KafkaError._PURGE_QUEUE), message)

    def begin_transaction(self) -> None:
        if self.failed is not None:
            raise KafkaException(self.failed)
        self.open = []

    def commit_transaction(self, timeout: float = 0) -> None:
        if self.fail_commit is not None:
            raise self.fail_commit
        self.flush()  # librdkafka flushes before it commits, serving the delivery reports
        self._markers()
        self.visible.append(self.open)

    def abort_transaction(self, timeout: float = 0) -> None:
        self._markers()
        self.aborted += 1

    def _markers(self) -> None:
        for where in {(m.topic(), m.partition()) for m in self.open}:
            self.offsets[where] += 1

    def close(self) -> None:
        pass


class FakeCache:
    """The client cache of a Spark worker, handing out fake producers."""

    def __init__(self) -> None:
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.visible: list[list[Message]] = []
        self.producers: dict[str, FakeProducer] = {}
        self.dropped: list[str] = []
        self.kept: dict[Any, Any] = {}

    def producer(self, key: str, build: Any, digest: str = "") -> RoutedProducer:
        router = Router()
        fake = FakeProducer(router.delivered, self.offsets, self.visible)
        self.producers[key] = fake
        return RoutedProducer(fake, router, key)

    def drop_producer(self, key: str) -> None:
        self.dropped.append(key)

    def client(self, key: Any, build: Any, digest: str = "") -> Any:
        """Kafka clients are never contacted here; what the cache keeps that is not a client (the
        slot's outage clock) is built and kept as in a worker."""
        if key[0] == "outage":
            return self.kept.setdefault(key, build())
        return object()


def job(*, continuous: bool) -> CopyJob:
    f = flow()
    source, target = _clusters()  # never contacted
    lease = Lease(1, 30.0, 100) if continuous else None
    r = CopyRange("t", 0, 0, OPEN_END, "id-1", REMOTE)
    return CopyJob(f, source, target, 0, (r,), HISTORY, PROGRESS, 1, "run-1", 0, lease=lease)


def _clusters() -> tuple[Any, Any]:
    from srm.config import parse_config
    from tests.unit.test_ownership import CONFIG

    config, _ = parse_config(CONFIG, "srm.yaml")
    assert config is not None
    return config.cluster("a"), config.cluster("b")


def partition_state(copy: CopyJob) -> PartitionState:
    r = copy.ranges[0]
    state = PartitionState(r, PartitionResult(r.topic, r.partition, r.target_topic, r.end), 0, 0, r.topic_id)
    state.committed_at = 0.0
    return state


def copy(writer: TargetWriter, state: PartitionState, offsets: list[int]) -> None:
    """What the copy loop does with source records at ``offsets``."""
    for offset in offsets:
        if not writer.in_transaction:
            writer.begin_with(state)
        writer.producer.produce(REMOTE, b"v%d" % offset, key=b"k", partition=0, on_delivery=writer.reporters[state])
        state.produced.append(offset)
        state.next_offset = offset + 1
    writer.produced(len(offsets), 2 * len(offsets))


def visible(cache: FakeCache) -> list[Message]:
    return [m for txn in cache.visible for m in txn]


def history_runs(cache: FakeCache) -> list[tuple[tuple[int, int, int], ...]]:
    return [OffsetRunsRecord.from_message(m).runs for m in visible(cache) if m.topic() == HISTORY and not is_opener(m)]


def progress(cache: FakeCache) -> list[ProgressRecord]:
    return [ProgressRecord.from_message(m) for m in visible(cache) if m.topic() == PROGRESS]


def test_a_commit_makes_the_records_their_exact_runs_and_the_progress_visible_together() -> None:
    cache, copy_job = FakeCache(), job(continuous=True)
    writer = TargetWriter(copy_job, cache)  # type: ignore[arg-type]
    state = partition_state(copy_job)
    writer.track([state])
    copy(writer, state, [0, 1, 2, 4])  # 3: an aborted record or a marker on the source
    writer.commit([state])
    assert [m.value() for m in visible(cache) if m.topic() == REMOTE] == [b"v0", b"v1", b"v2", b"v4"]
    assert history_runs(cache) == [((0, 0, 3), (4, 3, 1))]
    # A new writer's first commit writes the progress plain, and restates it (it cannot tell
    # whether the history its partitions' journaled records name still exists).
    assert [(r.next_offset, r.journaled) for r in progress(cache)] == [(5, False), (5, False)]
    assert state.committed == 5 and state.result.runs == [(0, 0, 3), (4, 3, 1)]
    # the next transaction goes to the slot's other producer; its target offsets follow the marker
    assert writer.producer is cache.producers[copy_job.transactional_ids[1]]
    copy(writer, state, [5, 6])
    writer.commit([state])
    assert history_runs(cache)[-1] == ((5, 5, 2),)  # 4: the first commit's marker
    # continuous: now journaled, from where its history records are
    last = progress(cache)[-1]
    assert (last.next_offset, last.journaled) == (7, True)
    assert last.history_from >= 0
    copy(writer, state, [7])
    writer.commit([state])
    assert history_runs(cache)[-1] == ((7, 8, 1),)
    assert len(progress(cache)) == 3, "no record within PROGRESS_EVERY_S: the history holds the position"


def test_a_record_that_is_not_delivered_aborts_the_transaction_and_nothing_becomes_visible() -> None:
    cache, copy_job = FakeCache(), job(continuous=False)
    writer = TargetWriter(copy_job, cache)  # type: ignore[arg-type]
    state = partition_state(copy_job)
    writer.track([state])
    copy(writer, state, [0, 1])
    writer.producer.fail_delivery[REMOTE] = KafkaError(KafkaError._MSG_TIMED_OUT)
    with pytest.raises(TransactionAborted):
        writer.commit([state])
    assert writer.producer.aborted == 1 and not writer.in_transaction
    assert visible(cache) == [] and state.committed == 0
    assert state.rewind() == 0  # the copier reads again from the committed progress
    writer.producer.fail_delivery.clear()
    copy(writer, state, [0, 1])
    writer.commit([state])
    assert [m.value() for m in visible(cache) if m.topic() == REMOTE] == [b"v0", b"v1"]
    assert history_runs(cache) == [((0, 3, 2),)]  # after the aborted transaction's 2 records and marker
    assert writer.usable


def test_records_a_failed_transaction_never_sends_are_purged_and_the_refusal_named_at_once() -> None:
    from srm.errors import ReplicationError

    cache, copy_job = FakeCache(), job(continuous=True)
    writer = TargetWriter(copy_job, cache)  # type: ignore[arg-type]
    state = partition_state(copy_job)
    writer.track([state])
    copy(writer, state, [0, 1, 2])
    # the target refused to add the remote partition to the transaction: its records stay queued
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed", txn_requires_abort=True)
    writer.producer.failed = refused
    named = r"not authorized to write topic 'a\.t' on b .*needs WRITE on TOPIC 'a\.t'"
    with pytest.raises(ReplicationError, match=named):
        writer.commit([state])
    # the 3 records and the progress records queued behind them: purged, not waited for up to FLUSH_TIMEOUT_S
    assert writer.producer.purged == 5
    assert visible(cache) == [] and state.committed == 0


def produce_one(writer: TargetWriter, state: PartitionState, offset: int) -> None:
    """As the copy loop does: a record the producer refuses goes to ``send_again``."""
    message = Message("t", 0, offset, b"k", b"v%d" % offset)
    if not writer.in_transaction:
        writer.begin_with(state)
    try:
        writer.producer.produce(REMOTE, message.value(), key=b"k", partition=0, on_delivery=writer.reporters[state])
    except KafkaException as exc:
        writer.send_again(state, message, 0, None, exc)
    state.produced.append(offset)
    state.next_offset = offset + 1
    writer.produced(1, 2)


def test_a_partition_the_producer_does_not_know_yet_is_looked_up_and_its_record_written() -> None:
    cache, copy_job = FakeCache(), job(continuous=True)
    writer = TargetWriter(copy_job, cache)  # type: ignore[arg-type]
    state = partition_state(copy_job)
    writer.track([state])
    # the driver added the remote partition after the producer took its metadata: refused until
    # the producer asked for the topic's metadata twice (the brokers learn of it a moment later)
    producer = writer.producer
    producer.stale[REMOTE] = 2
    produce_one(writer, state, 0)
    writer.commit([state])
    assert [m.value() for m in visible(cache) if m.topic() == REMOTE] == [b"v0"]
    assert producer.lookups == 2 and state.committed == 1


def test_a_partition_the_target_never_shows_is_gone_after_the_metadata_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    from srm.errors import RemoteTopicGoneError
    from srm.replication import resend

    monkeypatch.setattr(resend, "METADATA_WAIT_S", 0.3)
    cache, copy_job = FakeCache(), job(continuous=True)
    writer = TargetWriter(copy_job, cache)  # type: ignore[arg-type]
    state = partition_state(copy_job)
    writer.track([state])
    writer.producer.stale[REMOTE] = 10**6
    with pytest.raises(RemoteTopicGoneError, match=r"remote topic 'a\.t' partition 0 is gone from b"):
        produce_one(writer, state, 0)
    assert writer.producer.lookups > 1, "asked again within the wait"


def test_a_fenced_writer_drops_its_producers_and_says_a_newer_writer_took_over() -> None:
    cache, copy_job = FakeCache(), job(continuous=True)
    writer = TargetWriter(copy_job, cache)  # type: ignore[arg-type]
    state = partition_state(copy_job)
    writer.track([state])
    copy(writer, state, [0])
    writer.producer.fail_commit = KafkaException(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    with pytest.raises(ProducerFencedError, match="fenced while committing a transaction"):
        writer.commit([state])
    assert not writer.usable
    assert sorted(cache.dropped) == sorted(copy_job.transactional_ids)
    assert visible(cache) == [] and state.committed == 0


def test_a_record_fails_its_transaction_within_the_flows_retry_bound_not_after_the_transaction_time_out() -> None:
    from srm.replication.producers import delivery_timeout_ms

    assert delivery_timeout_ms(20_000) == 20_000
    assert delivery_timeout_ms(300_000) == 120_000, "librdkafka caps it at transaction.timeout.ms"
    assert delivery_timeout_ms(0) == 5_000, "0 would mean no time-out to librdkafka"
    assert delivery_timeout_ms(-1) == 120_000, "waiting for good: as long as a transaction may be open"


def test_a_producer_that_cannot_start_past_the_bound_is_a_lasting_fault_naming_what_the_copier_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from confluent_kafka import KafkaError, KafkaException

    from srm.errors import LastingFaultError
    from srm.replication import outage as outage_module
    from srm.replication import writer as writer_module
    from srm.replication.outage import Outage

    class Frozen:
        """A producer whose target does not answer: init_transactions times out, retriably."""

        calls = 0

        def init_transactions(self, timeout: float) -> None:
            Frozen.calls += 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "init timed out", retriable=True))

    cache, copy_job = FakeCache(), job(continuous=False)
    writer = TargetWriter(copy_job, cache, lambda: "flow a->b: slot 0 copying t[0] at offset 7")  # type: ignore[arg-type]
    ticks = iter(range(0, 1000, 40))
    cache.kept[("outage", copy_job.flow.name, "0")] = writer.outage = Outage(clock=lambda: float(next(ticks)))
    monkeypatch.setattr(writer_module.clients, "producer", lambda *a, **k: Frozen())
    monkeypatch.setattr(writer_module.clients, "settled", lambda client: client)
    monkeypatch.setattr(outage_module, "RETRY_PAUSE_S", 0.0)
    with pytest.raises(LastingFaultError, match=r"^flow a->b: slot 0 copying t\[0\] at offset 7: failing since "):
        writer._build_producer("srm-replicate.a.b.1.0")
    assert Frozen.calls > 1, "retried within the bound"


def test_a_lingering_writers_producers_hold_a_partitions_records_for_the_linger(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """transaction.linger.ms: the producers hold each partition's records as long as the
    transaction stays open anyway (up to a second), one Produce request per partition and
    transaction; built under their own cache digest, so a pair built for another linger is not reused."""
    from dataclasses import replace

    from srm.replication import writer as writer_module
    from srm.replication.producers import LINGER_CAP_MS, PRODUCER_SETTINGS, producer_settings

    built: list[dict[str, Any]] = []

    class Started:
        def init_transactions(self, timeout: float) -> None:
            pass

    def producer(cluster: Any, **settings: Any) -> Started:
        built.append(settings)
        return Started()

    monkeypatch.setattr(writer_module.clients, "producer", producer)
    monkeypatch.setattr(writer_module.clients, "settled", lambda client: client)
    digests: list[str] = []

    class Cache(FakeCache):
        def producer(self, key: str, build: Any, digest: str = "") -> RoutedProducer:
            digests.append(digest)
            return super().producer(key, build, digest)

    plain = job(continuous=True)
    for linger, expected in ((0, PRODUCER_SETTINGS["linger.ms"]), (100, 100), (20_000, LINGER_CAP_MS)):
        copy_job = replace(plain, lease=replace(plain.lease, transaction_linger_ms=linger))
        TargetWriter(copy_job, Cache())._build_producer(copy_job.transactional_id)
        assert built[-1]["linger.ms"] == expected == producer_settings(linger)["linger.ms"]
        assert built[-1]["transactional.id"] == copy_job.transactional_id
    assert len(set(digests)) == 3, "one digest per linger"
    assert producer_settings(0) == PRODUCER_SETTINGS
