"""Writing copied records to the target, committed together with progress and history.

Per transaction (when exactly_once): the records, then per partition one history record in
``srm-offset-syncs.<source>.internal`` with the exact offset runs and the next offset (and MM2
OffsetSyncs when that topic lives on the target) and one progress record in
``srm-offsets.<source>.internal`` (:mod:`srm.replication.progress`), then the commit. Continuous
mode writes the progress record of a partition every PROGRESS_EVERY_S only, journaled: the
history records in between hold the position. Either all of it is visible on the target or
none of it; a crash anywhere leaves an open transaction that the next writer of the same
transactional id, or the next run's fencing (:mod:`srm.replication.ownership`), aborts. Without
exactly_once the same order is kept with an idempotent producer, the progress records produced
after the records are acknowledged: a crash between the two copies the records again
(at-least-once).

The writer orchestrates a transaction; its parts are separate: the slot's producers
(:mod:`.producers`), the history records (:mod:`.history_records`), the progress journal's
decisions (:mod:`.journal`) and the records' delivery reports with what a failure among them
means (:mod:`.deliveries`).

Failures of a transaction call follow librdkafka's classes: a retriable error repeats the call
(the target's leader or coordinator moved, the broker restarts); an abortable one aborts the
transaction and raises TransactionAborted, after which the copier rewinds its partitions to the
committed progress and goes on; a fatal one (fenced, or the producer is unusable) drops the
producer and raises.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from srm.errors import ReplicationError, SrmError
from srm.kafka import clients
from srm.kafka.internal_topics import status_topic_name
from srm.mm2.records import ProgressRecord
from srm.replication.clientcache import ClientCache
from srm.replication.deliveries import Deliveries, TransactionAborted, failed_transaction
from srm.replication.history_records import HistoryRecords
from srm.replication.job import CopyJob
from srm.replication.journal import ProgressJournal
from srm.replication.kafka_errors import (
    call_error,
    code_name,
    kafka_error,
    transaction_error,
)
from srm.replication.outage import Outage, retried, slot_outage
from srm.replication.partition_state import PartitionState
from srm.replication.producers import ProducerPair, RoutedProducer, Router, delivery_timeout_ms, producer_settings
from srm.replication.progress import progress_group
from srm.replication.resend import send_again
from srm.replication.runs import OffsetRun
from srm.replication.status import StatusWriter

log = logging.getLogger(__name__)
T = TypeVar("T")

# Bounds of one transaction in available-now mode (continuous mode commits every
# transaction.interval.ms): the broker aborts transactions older than transaction.timeout.ms,
# and a smaller transaction makes records visible sooner.
CHUNK_MAX_RECORDS = 200_000
CHUNK_MAX_BYTES = 128 * 1024 * 1024
CHUNK_MAX_SECONDS = 10.0
TXN_TIMEOUT_S = 60.0


class TargetWriter:
    def __init__(self, job: CopyJob, cache: ClientCache, where: Callable[[], str] | None = None) -> None:
        self.cache = cache
        self.exactly_once = job.flow.settings.exactly_once
        self.history = HistoryRecords(job, self.exactly_once)
        self.job = job
        # Failures that may pass (retriable calls, aborted transactions) count against the flow's
        # errors.retry.timeout from the first one after a commit, across tasks of the slot.
        self.outage: Outage = slot_outage(cache, job)
        self.where: Callable[[], str] = where or self.describe  # the copier says more: its partitions
        self.delivery_timeout_ms = delivery_timeout_ms(job.flow.settings.errors_retry_timeout_ms)
        # Continuous exactly-once: a progress record may be journaled (srm.replication.progress).
        self.journal = ProgressJournal(self.exactly_once and job.lease is not None, self._progress)
        self.status = StatusWriter()  # what each partition's lease copied so far, for the monitor
        self.status_topic = status_topic_name(job.flow)
        ids = job.transactional_ids if self.exactly_once and job.lease is not None else job.transactional_ids[:1]
        self.digest = clients.settings_digest(job.target)  # its clients are built again when it changes
        # producer_settings follow the linger: a pair built for another is built again
        pair_digest = job.lingering_digest(self.digest)
        self.pair = ProducerPair(cache, ids, self._key, self._build_producer, self, digest=pair_digest)
        self.pair.start()
        # The pair's producer of the turn, kept as an attribute: produce() reads it once per record.
        self.producer = self.pair.producer
        self.target_consumer = cache.client(("target", job.flow.name), self._build_target_consumer, self.digest)
        self.by_target: dict[tuple[str, int], PartitionState] = {}
        self.reporters: dict[PartitionState, Callable[[Any, Any], None]] = {}
        self.in_transaction = False
        self.chunk_records = 0
        self.chunk_bytes = 0
        self.chunk_started = 0.0
        self.commits = 0
        self.usable = True  # False once the producer was dropped: the copier builds a new writer
        self.deliveries = Deliveries(
            lambda: self.job, self.outage, self.delivery_timeout_ms, self.target_consumer, lambda: self._slot
        )

    @property
    def job(self) -> CopyJob:
        return self._job

    @job.setter
    def job(self, job: CopyJob) -> None:
        """A renewed lease's job: its history records follow it."""
        self._job = job
        self.history.job = job

    def _key(self, transactional_id: str) -> str:
        return transactional_id if self.exactly_once else f"idempotent:{transactional_id}"

    def _build_producer(self, transactional_id: str) -> RoutedProducer:
        router = Router()
        settings: dict[str, Any] = {
            **producer_settings(self.job.linger_ms),
            "on_delivery": router.delivered,
            "message.timeout.ms": self.delivery_timeout_ms,
        }
        if self.exactly_once:
            settings["transactional.id"] = transactional_id
        else:
            settings["enable.idempotence"] = True
        producer = clients.settled(clients.producer(self.job.target, **settings))
        if self.exactly_once:
            try:
                self._retry(lambda: producer.init_transactions(self._call_timeout()), transactional_id)
            except SrmError:  # LastingFaultError: the bound passed, with the slot's partitions named
                raise
            except Exception as exc:
                raise self._api_error(exc, "starting transactions") from None
        return RoutedProducer(producer, router, transactional_id)

    def _build_target_consumer(self) -> Any:
        # Reads the ownership records of the flow (to the end, see latest_ownership). Never subscribes.
        return clients.reader(self.job.target, progress_group(self.job.flow.source))

    def track(self, states: list[PartitionState]) -> None:
        self.by_target = {s.target: s for s in states}
        self.reporters = {s: self._reporter(s) for s in states}
        self.status.track(states)

    # --- records -----------------------------------------------------------------------------
    # The copy loop produces the records itself (srm.replication.copier, its per-record path kept
    # lean, see bench/REPORT.md "Profile"): each to the same partition of the target with its key,
    # value, headers and CreateTime, its delivery report to ``reporters[state]``, after
    # ``begin_with`` and with ``send_again`` when the producer refuses it; then ``produced``.
    def begin_with(self, state: PartitionState) -> None:
        """Open a transaction for records of ``state`` (the first of the transaction)."""
        self._begin()
        self.history.open(self.producer, state)

    def send_again(self, state: PartitionState, message: Any, timestamp: int, headers: Any, exc: Exception) -> None:
        """The producer refused a record with ``exc`` (srm.replication.resend)."""
        send_again(self, state, message, timestamp, headers, refused=exc)

    def produced(self, records: int, size: int) -> None:
        """The copy loop produced ``records`` more records of ``size`` bytes of values in all."""
        self.chunk_records += records
        self.chunk_bytes += size

    def _reporter(self, state: PartitionState) -> Callable[[Any, Any], None]:
        """The delivery report callback of the records of ``state``: a record's own callback (given
        with each ``produce``) spares the producer-wide one's lookup of its partition."""
        acked = state.acked

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                acked.append(message.offset())
            else:
                self.deliveries.undelivered(state, error, message)

        return delivered

    def on_delivery(self, error: Any, message: Any) -> None:
        """The producer-wide delivery reports: those of the history records and the MM2 syncs
        (records of the copy have their own, ``reporters``)."""
        mark = self.journal.mark
        if error is None and message.topic() == self.job.history_topic and mark.acked(message.offset()):
            log.warning(
                "%s: history topic %s starts again at offset %d (it was recreated); progress records follow",
                *(self._slot, self.job.history_topic, message.offset()),
            )

    def chunk_full(self) -> bool:
        """Available-now: the open transaction reached one of its bounds."""
        if not self.chunk_records:
            return False
        return (
            self.chunk_records >= CHUNK_MAX_RECORDS
            or self.chunk_bytes >= CHUNK_MAX_BYTES
            or time.monotonic() - self.chunk_started >= CHUNK_MAX_SECONDS
        )

    def due_in(self, interval_s: float) -> float | None:
        """Continuous: seconds until the open transaction is due (<= 0: now), None if none is open."""
        if not self.chunk_records:
            return None
        if self.chunk_records >= CHUNK_MAX_RECORDS or self.chunk_bytes >= CHUNK_MAX_BYTES:
            return 0.0
        return self.chunk_started + interval_s - time.monotonic()

    # --- commit ------------------------------------------------------------------------------
    def settle_due(self, states: Sequence[PartitionState]) -> bool:
        """Continuous: a quiet partition's latest progress record is journaled: time for a plain one;
        or a restatement is pending, which must not wait for more records; or a partition's status
        (srm.replication.status) is due."""
        now = time.monotonic()
        return self.journal.settle_due(states, now) or bool(self.status.due(states, now))

    def commit(self, states: Sequence[PartitionState], *, settle: Collection[PartitionState] = ()) -> None:
        """Make everything produced so far, and the progress of ``states``, visible at once.

        Progress records: with every moved partition, except that continuous mode writes a
        journaled one at most every PROGRESS_EVERY_S per partition (the history record holds the
        position in between); a plain one for each quiet partition whose latest is journaled,
        PROGRESS_EVERY_S after it was written; and a plain one for each of ``settle`` (the copier
        stops, or they leave it), moved or not.
        """
        now = time.monotonic()
        journal = self.journal
        dirty = [s for s in states if s.dirty]
        due = [s for s in dirty if s in settle or journal.due(s, now)]
        quiet = journal.quiet(states, now, settle)
        if not dirty and not quiet and not self.in_transaction and not self._pending(states, now):
            return
        if not self.in_transaction:
            self._begin()
        try:
            # Known already: the progress does not wait for the records' acknowledgements.
            mark = journal.history_from()
            for state in due:
                self._progress(state, -1 if state in settle else mark)
            for state in quiet:
                self._progress(state)
            self._report(states, now)
            self.flush()
            restarts = journal.mark.restarts
            restated = journal.restate(states, due, restarts)
            pending = [self.history.write(self.producer, s) for s in dirty]
            if self.exactly_once:
                self._transactional(lambda: self.producer.commit_transaction(self._call_timeout()))
            else:
                self.flush()
        except (ReplicationError, TransactionAborted):
            self.abort()
            raise
        except Exception as exc:
            # A failed transaction refuses the progress records too ("Erroneous state"): say why it failed.
            failed = (
                failed_transaction(self.producer)
                if self.exactly_once and code_name(kafka_error(exc)) == "_STATE"
                else None
            )
            self.abort()
            if failed is not None:
                self._drop_producers()
                raise transaction_error(
                    failed, self.job.source, self.job.target, "committing a transaction", self.transaction_topics
                ) from None
            raise self._api_error(exc, "committing a transaction") from None
        self._committed(dirty, pending)
        journal.restated = restarts
        journal.recorded(due, [*quiet, *restated], journaled_from=mark, settle=settle, now=now)
        if journal.restate_pending(states):
            # Learnt during this commit (its history records landed in a new topic): restate now,
            # in a transaction of its own, not with the next records, which may be long in coming.
            self.commit(states)

    def _pending(self, states: Sequence[PartitionState], now: float) -> bool:
        """Something to commit though nothing moved: a restatement, or a partition's status."""
        return self.journal.restate_pending(states) or bool(self.status.due(states, now))

    def _report(self, states: Sequence[PartitionState], now: float) -> None:
        """The statuses due, in the open transaction (srm.replication.status)."""
        for status in self.status.statuses(states, now):
            self.producer.produce(self.status_topic, status.value(), key=status.key())

    def _committed(self, dirty: list[PartitionState], pending: list[list[OffsetRun]]) -> None:
        self.in_transaction = False
        self.commits += 1
        # Latency: from a record's CreateTime until it is visible on the target, which for a
        # read_committed consumer is the commit (at-least-once: the acknowledgement before it).
        now = time.monotonic()
        visible_ms = time.time() * 1000
        for state, runs in zip(dirty, pending, strict=True):
            result = state.result
            result.runs.extend((r.source_first, r.target_first, r.length) for r in runs)
            if runs:
                result.target_first = runs[0].target_first if result.target_first < 0 else result.target_first
                result.target_last = runs[-1].target_end - 1
            state.committed_now(now)
            result.transactions += 1
            result.latency.add_ages(visible_ms, state.stamps)
            state.forget_stamps()
        self.chunk_records = self.chunk_bytes = 0
        if dirty:  # records reached the target (a commit of progress alone may pass where records fail)
            self.outage.recovered()
        self.pair.advance()
        self.producer = self.pair.producer

    def _begin(self) -> None:
        if not self.exactly_once:
            self.in_transaction = True
            self.chunk_started = time.monotonic()
            return
        try:
            self.producer.begin_transaction()
        except Exception as exc:
            raise self._api_error(exc, "beginning a transaction") from None
        self.in_transaction = True
        self.chunk_started = time.monotonic()

    def flush(self) -> None:
        self.deliveries.flush(self.producer, self.in_transaction)

    def _progress(self, state: PartitionState, history_from: int = -1) -> None:
        """The progress record of ``state``: journaled from ``history_from`` when that is >= 0."""
        offset, topic_id = state.position
        record = ProgressRecord(state.range.topic, state.range.partition, topic_id, offset, history_from)
        self.producer.produce(self.job.progress_topic, **record.as_produce_kwargs())

    def abort(self) -> None:
        if not self.in_transaction:
            return
        self.in_transaction = False
        self.chunk_records = self.chunk_bytes = 0
        self.history.reset()
        if not self.exactly_once:
            return
        try:
            self.producer.abort_transaction(self._call_timeout())
        except Exception as exc:  # the producer is unusable; the next task builds a new one
            log.warning("aborting the transaction of %s failed (%s); dropping the producer", self._slot, exc)
            self._drop_producers()

    def release(self) -> None:
        """The task is over: delivery reports no longer belong to it."""
        self.pair.release()

    def _drop_producers(self) -> None:
        """The producer failed: this writer is done, the next one initialises the slot afresh."""
        self.usable = False
        self.pair.drop()

    # --- transaction calls --------------------------------------------------------------------
    @property
    def _slot(self) -> str:
        return self.pair.transactional_id or self.job.transactional_id

    def _call_timeout(self) -> float:
        """A transaction call's time-out: TXN_TIMEOUT_S, and once failures began no more than what
        is left of the flow's errors.retry.timeout (at least a second: an abort after the bound)."""
        left = self.outage.remaining(self.job.flow.settings.errors_retry_timeout_ms) if self.outage.ongoing else None
        return TXN_TIMEOUT_S if left is None else max(1.0, min(TXN_TIMEOUT_S, left))

    def describe(self) -> str:
        """What this writer does, where: for the messages of failures that last."""
        t = self.job.target
        return f"flow {self.job.flow.name}: {self._slot} writing to {t.alias} ({t.describe()})"

    def _retry(self, call: Callable[[], T], slot: str | None = None) -> T:
        """``call()``, repeated while it fails with a retriable error (srm.replication.outage.retried)."""
        timeout_ms = self.job.flow.settings.errors_retry_timeout_ms
        return retried(call, self.outage, timeout_ms, self.where, slot or self._slot)

    def _transactional(self, call: Callable[[], None]) -> None:
        """A call inside the open transaction: retriable errors repeat it, abortable ones abort."""
        from confluent_kafka import KafkaException

        try:
            self._retry(call)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if error is not None and error.txn_requires_abort() and not error.fatal():
                if not self.outage.ongoing:  # then once a minute, by the outage
                    log.warning("%s: %s; aborting the transaction", self._slot, error.str())
                self.outage.began(error.str())
                raise TransactionAborted(error.str()) from None
            raise

    # --- errors ------------------------------------------------------------------------------
    @property
    def transaction_topics(self) -> list[str]:
        """The target topics this writer copies into, and the flow's history, progress and status topics."""
        internal = [self.job.history_topic, self.job.progress_topic, self.status_topic]
        return [*sorted({topic for topic, _ in self.by_target}), *internal]

    def _api_error(self, exc: Exception, doing: str) -> ReplicationError:
        """A failed transaction call: the producer is dropped, so the next task starts afresh."""
        self._drop_producers()
        return call_error(exc, doing, self._slot, self.job.source, self.job.target, topics=self.transaction_topics)
