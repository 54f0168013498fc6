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
from functools import partial
from typing import Any, NamedTuple, TypeVar

from srm import clients
from srm.errors import ReplicationError
from srm.records import OPENER_HEADERS, OffsetRunsRecord, OffsetSync, ProgressRecord
from srm.replication.clientcache import ClientCache
from srm.replication.job import CopyJob
from srm.replication.kafka_errors import (
    FENCED,
    KNOWN_WRITE_ERRORS,
    code_name,
    kafka_error,
    transaction_error,
    write_error,
)
from srm.replication.partition_state import PartitionState
from srm.replication.progress import progress_group
from srm.replication.runs import OffsetRun, SyncPacer

log = logging.getLogger(__name__)
T = TypeVar("T")

# Bounds of one transaction in available-now mode (continuous mode commits every
# transaction.interval.ms): the broker aborts transactions older than transaction.timeout.ms,
# and a smaller transaction makes records visible sooner.
CHUNK_MAX_RECORDS = 200_000
CHUNK_MAX_BYTES = 128 * 1024 * 1024
CHUNK_MAX_SECONDS = 10.0
FLUSH_TIMEOUT_S = 120.0
TXN_TIMEOUT_S = 60.0
# A transaction call that keeps failing with retriable errors this long (the target unreachable)
# gives up: the task fails and Spark retries it.
RETRY_FOR_S = 120.0
# Continuous mode writes a partition's progress record at most this often while it is copied, and
# a plain one this long after it went quiet: the history records in between hold the position
# (srm.replication.progress), so most transactions leave the progress topic out, which saves the
# target a Produce, a partition verification and a commit marker per transaction.
PROGRESS_EVERY_S = 2.0
# Delivery failures that a later attempt can get past (the target's broker was down or a leader
# moved for longer than librdkafka retried): the transaction is aborted and copied again.
# Records librdkafka dropped from its queue: after an abortable transaction error, or on close.
PURGED = ("_PURGE_QUEUE", "_PURGE_INFLIGHT")
TRANSIENT = (
    "_MSG_TIMED_OUT",
    "_TIMED_OUT",
    "REQUEST_TIMED_OUT",
    "_TRANSPORT",
    "NOT_ENOUGH_REPLICAS",
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",  # librdkafka's name of Kafka's NOT_LEADER_OR_FOLLOWER
    *PURGED,
)
PRODUCER_SETTINGS = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    # What librdkafka may hold before the broker acknowledges it: 100 ms of the brokers' limit
    # here is ~25 MB at 1 KiB records; more only adds memory (the default is 1 GiB).
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 64 * 1024,
    "transaction.timeout.ms": 120_000,
}


class HistoryMark:
    """One past the latest history offset a writer's records got (-1: none yet): every history
    record it writes later lands at or after it, the ``history_from`` of its journaled progress.

    A writer's records land one after the other (a transaction's history is acknowledged before
    its commit, and the next transaction starts after that), so an offset below the mark means
    the history topic was deleted and created again under the copier: its offsets start over, and
    every journaled progress record names a history that is gone. ``restarts`` counts them.
    """

    def __init__(self) -> None:
        self.value = -1
        self.restarts = 0

    def acked(self, offset: int) -> bool:
        """A history record landed at ``offset``; True if the history topic started over."""
        restarted = offset < self.value
        self.value = offset + 1
        self.restarts += restarted
        return restarted


class TransactionAborted(Exception):
    """The open transaction was aborted after an abortable error: rewind to the committed progress."""


class _Router:
    """Delivery reports of a cached producer go to whichever task uses it now."""

    def __init__(self) -> None:
        self.sink: TargetWriter | None = None

    def delivered(self, error: Any, message: Any) -> None:
        if self.sink is not None:
            self.sink.on_delivery(error, message)


class _RoutedProducer(NamedTuple):
    """What the client cache keeps per transactional id: the producer and its reports' router."""

    producer: Any
    router: _Router
    transactional_id: str

    def close(self) -> None:
        # A producer in a fatal state may fail to close: what failed before matters, not this.
        try:
            self.producer.close()
        except Exception as exc:
            log.warning("closing a dropped producer failed (%s)", exc)


class TargetWriter:
    def __init__(self, job: CopyJob, cache: ClientCache) -> None:
        self.job = job
        self.cache = cache
        self.exactly_once = job.flow.settings.exactly_once
        # Continuous mode with exactly_once alternates two transactional producers of the slot
        # (ids ``<slot>`` and ``<slot>.alt``): the next transaction starts on the other one at once.
        # With one producer, the first records after a commit ask the coordinator to add their
        # partitions while it is still writing the previous commit's markers; it answers
        # CONCURRENT_TRANSACTIONS and librdkafka tries again 20 ms later, a wait every record of
        # that transaction pays. A commit returns once its outcome is decided (PrepareCommit), so
        # the other producer's records land after it in every partition, in order. Both are
        # initialised here, before the copier reads the ownership record (the fencing protocol).
        ids = job.transactional_ids if self.exactly_once and job.lease is not None else job.transactional_ids[:1]
        self.turn = 0
        self.producers: list[_RoutedProducer] = []  # filled one by one: a failure drops those built
        for tid in ids:
            self.producers.append(cache.producer(self._key(tid), partial(self._build_producer, tid)))
        # producers[turn].producer, kept as an attribute: produce() reads it once per record.
        self.producer = self.producers[0].producer
        for routed in self.producers:
            routed.router.sink = self
        self.target_consumer = cache.client(("target", job.flow.name), self._build_target_consumer)
        self.by_target: dict[tuple[str, int], PartitionState] = {}
        self.reporters: dict[PartitionState, Callable[[Any, Any], None]] = {}
        self.in_transaction = False
        self.chunk_records = 0
        self.chunk_bytes = 0
        self.chunk_started = 0.0
        self.commits = 0
        self.usable = True  # False once the producer was dropped: the copier builds a new writer
        self.error: tuple[Any, PartitionState, int, int] | None = None
        # MM2 offset syncs on the target go into the transactions: an aborted one takes its syncs
        # with it, so the pacers start afresh (the next record of each partition gets a sync).
        self.pacers: dict[tuple[str, int], SyncPacer] = {}
        # Continuous exactly-once: a progress record may be journaled (srm.replication.progress).
        self.journal = self.exactly_once and job.lease is not None
        self.history_mark = HistoryMark()
        # The history's restarts a committed transaction restated (_restate). A new writer cannot
        # tell whether the history went on from the offsets its partitions' journaled records name
        # (one built after a dropped producer may follow the topic's deletion), so its first
        # commit restates them.
        self.restated = -1

    def _key(self, transactional_id: str) -> str:
        return transactional_id if self.exactly_once else f"idempotent:{transactional_id}"

    def _build_producer(self, transactional_id: str) -> _RoutedProducer:
        router = _Router()
        settings: dict[str, Any] = {**PRODUCER_SETTINGS, "on_delivery": router.delivered}
        if self.exactly_once:
            settings["transactional.id"] = transactional_id
        else:
            settings["enable.idempotence"] = True
        producer = clients.producer(self.job.target, **settings)
        if self.exactly_once:
            try:
                self._retry(lambda: producer.init_transactions(TXN_TIMEOUT_S), transactional_id)
            except Exception as exc:
                raise self._api_error(exc, "starting transactions") from None
        return _RoutedProducer(producer, router, transactional_id)

    def _build_target_consumer(self) -> Any:
        # Reads the ownership records of the flow (to the end, see latest_ownership). Never subscribes.
        return clients.reader(self.job.target, progress_group(self.job.flow.source))

    def track(self, states: list[PartitionState]) -> None:
        self.by_target = {s.target: s for s in states}
        self.reporters = {s: self._reporter(s) for s in states}

    # --- records -----------------------------------------------------------------------------
    # The copy loop produces the records itself (srm.replication.copier, its per-record path kept
    # lean, see bench/REPORT.md "Profile"): each to the same partition of the target with its key,
    # value, headers and CreateTime, its delivery report to ``reporters[state]``, after
    # ``begin_with`` and with ``send_again`` when the producer refuses it; then ``produced``.
    def begin_with(self, state: PartitionState) -> None:
        """Open a transaction for records of ``state`` (the first of the transaction)."""
        self._begin()
        self._open_history(state)

    def send_again(self, state: PartitionState, message: Any, timestamp: int, headers: Any, exc: Exception) -> None:
        """The producer refused a record with ``exc``: produce it once its local queue has room,
        else raise what the failure means."""
        value = message.value()
        while isinstance(exc, BufferError):  # local queue full: let delivery reports drain it
            self.producer.poll(0.05)
            try:
                self.producer.produce(
                    state.range.target_topic,
                    value,
                    key=message.key(),
                    partition=state.range.partition,
                    on_delivery=self.reporters[state],
                    timestamp=timestamp if timestamp > 0 else 0,
                    headers=headers,
                )
                return
            except Exception as again:
                exc = again
        if self.exactly_once and code_name(kafka_error(exc)) == "_STATE":
            # A failed transaction refuses every later record ("Erroneous state"): the cause is in
            # a delivery report, received already or still to come; _flush collects it and raises
            # it instead. (Never after a fatal error: fenced.)
            self._flush()
        raise self._record_error(exc, state, message.offset(), len(value) if value else 0) from None

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
                self._undelivered(state, error, message)

        return delivered

    def on_delivery(self, error: Any, message: Any) -> None:
        """The producer-wide delivery reports: those of the history records and the MM2 syncs
        (records of the copy have their own, ``reporters``)."""
        if error is None and message.topic() == self.job.history_topic and self.history_mark.acked(message.offset()):
            log.warning(
                "%s: history topic %s starts again at offset %d (it was recreated); progress records follow",
                *(self._slot, self.job.history_topic, message.offset()),
            )

    def _undelivered(self, state: PartitionState, error: Any, message: Any) -> None:
        # A broker rejects a whole batch of records at once: name the largest one, which for
        # "record too large" is the culprit.
        source_offset = state.produced[len(state.acked)] if len(state.acked) < len(state.produced) else -1
        state.acked.append(-1)  # keeps acked[i] aligned with produced[i]; the commit fails
        size = len(message.value() or b"")
        if self.error is None or size > self.error[3]:
            self.error = (error, state, source_offset, size)

    def _restate(
        self, states: Sequence[PartitionState], due: Collection[PartitionState], restarts: int
    ) -> list[PartitionState]:
        """The history started over (HistoryMark; learnt at the latest from the flush before, which
        acknowledges the transaction's opener), or this writer is new: the journaled progress
        records, those just written included, may name a history that is gone. A plain record for
        each of them, in this transaction (the last word until the next one). Until a transaction
        doing this commits, every transaction does it: an aborted one leaves the journaled records
        as they were. ``restarts``: the history's restarts seen so far; none new: nothing to do."""
        if not self.journal or restarts <= self.restated:
            return []
        restated = [s for s in states if s.journaled or s in due]
        for state in restated:
            self._progress(state)
        return restated

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
        or a restatement is pending (_restate), which must not wait for more records."""
        return (self.journal and bool(self._quiet(states, time.monotonic()))) or self._restate_pending(states)

    def _restate_pending(self, states: Sequence[PartitionState]) -> bool:
        """The history restarted, or this writer is new, and no commit restated it yet: True if a
        partition's latest progress record is journaled (else there is nothing to restate)."""
        if not self.journal or self.history_mark.restarts <= self.restated:
            return False
        if any(s.journaled for s in states):
            return True
        self.restated = self.history_mark.restarts  # every latest record is plain: none names the history
        return False

    @staticmethod
    def _quiet(
        states: Sequence[PartitionState], now: float, settle: Collection[PartitionState] = ()
    ) -> list[PartitionState]:
        """Partitions not moved since their latest progress record, a journaled one, whose plain
        one is due: PROGRESS_EVERY_S after it, or now for those in ``settle``; and, at once, those
        blocked by a data loss (copying stopped: their position must not depend on the history,
        which retention deletes in time)."""
        since = now - PROGRESS_EVERY_S
        return [
            s for s in states if s.journaled and (s.blocked or (s.settled and (s in settle or s.progress_at <= since)))
        ]

    def commit(self, states: Sequence[PartitionState], *, settle: Collection[PartitionState] = ()) -> None:
        """Make everything produced so far, and the progress of ``states``, visible at once.

        Progress records: with every moved partition, except that continuous mode writes a
        journaled one at most every PROGRESS_EVERY_S per partition (the history record holds the
        position in between); a plain one for each quiet partition whose latest is journaled,
        PROGRESS_EVERY_S after it was written; and a plain one for each of ``settle`` (the copier
        stops, or they leave it), moved or not.
        """
        now = time.monotonic()
        dirty = [s for s in states if s.dirty]
        due = [s for s in dirty if s in settle or self._progress_due(s, now)]
        quiet = self._quiet(states, now, settle)
        if not dirty and not quiet and not self.in_transaction and not self._restate_pending(states):
            return
        if not self.in_transaction:
            self._begin()
        try:
            # Known already: the progress does not wait for the records' acknowledgements.
            mark = self.history_mark.value if self.journal else -1
            for state in due:
                self._progress(state, -1 if state in settle else mark)
            for state in quiet:
                self._progress(state)
            self._flush()
            restarts = self.history_mark.restarts
            restated = self._restate(states, due, restarts)
            pending = [self._history(s) for s in dirty]
            if self.exactly_once:
                self._transactional(lambda: self.producer.commit_transaction(TXN_TIMEOUT_S))
            else:
                self._flush()
        except (ReplicationError, TransactionAborted):
            self.abort()
            raise
        except Exception as exc:
            self.abort()
            raise self._api_error(exc, "committing a transaction") from None
        self._committed(dirty, pending)
        self.restated = restarts
        self._recorded(due, [*quiet, *restated], journaled_from=mark, settle=settle, now=now)
        if self._restate_pending(states):
            # Learnt during this commit (its history records landed in a new topic): restate now,
            # in a transaction of its own, not with the next records, which may be long in coming.
            self.commit(states)

    @staticmethod
    def _recorded(
        due: list[PartitionState],
        plain: list[PartitionState],
        *,
        journaled_from: int,
        settle: Collection[PartitionState],
        now: float,
    ) -> None:
        """What the progress topic holds now for each partition whose record a transaction wrote:
        ``due`` journaled from ``journaled_from`` (plain when it is -1 or for those in ``settle``),
        ``plain`` plain (written last)."""
        for state in due:
            state.journaled, state.progress_at = journaled_from >= 0 and state not in settle, now
        for state in plain:
            state.journaled, state.progress_at = False, now

    def _progress_due(self, state: PartitionState, now: float) -> bool:
        """Does this transaction write the progress of ``state`` (moved by it)? Always when it is
        plain (a reader takes it as the last word), else every PROGRESS_EVERY_S."""
        return not self.journal or not state.journaled or state.progress_at <= now - PROGRESS_EVERY_S

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
            state.stamps.clear()
        self.chunk_records = self.chunk_bytes = 0
        self.turn = (self.turn + 1) % len(self.producers)
        self.producer = self.producers[self.turn].producer

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

    def _flush(self) -> None:
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        if self.error is not None:
            error, state, offset, size = self.error
            self.error = None
            if error.name() in PURGED and self.exactly_once:
                error = self._failed_transaction() or error
            if error.name() in TRANSIENT or (error.retriable() and error.name() not in KNOWN_WRITE_ERRORS):
                log.warning("%s: a record was not written (%s); aborting the transaction", self._slot, error.str())
                raise TransactionAborted(error.str())
            raise self._write_error(error, state, offset, size)
        if remaining:
            raise ReplicationError(
                f"{remaining} record(s) not acknowledged by {self.job.target.alias} within {FLUSH_TIMEOUT_S:.0f} s "
                f"({self.job.target.describe()}): is the cluster reachable?"
            )

    def _failed_transaction(self) -> Any:
        """Why the transaction failed when librdkafka purged its records, or None.

        An abortable transaction error (a partition that could not be added to the transaction, e.g.
        TOPIC_AUTHORIZATION_FAILED) purges the queued records and is reported only by the next
        transactional call. begin_transaction is the one without side effects: outside the ready
        state it only fails, with the transaction's error when it has one (else a state error).
        """
        from confluent_kafka import KafkaException

        try:
            self.producer.begin_transaction()
        except KafkaException as exc:
            cause = kafka_error(exc)
            return cause if code_name(cause) in KNOWN_WRITE_ERRORS else None
        self.in_transaction = True  # cannot happen in a transaction; if it did, the new one is aborted next
        return None

    def _open_history(self, state: PartitionState) -> None:
        """Put the history's partition into the transaction with its first records.

        The history records wait for the records' acknowledgements (they hold the target offsets).
        A partition new to a transaction is first added to it at the coordinator (AddPartitionsToTxn,
        a round trip with a write to the transaction log), so a history partition joining only then
        adds a round trip to every commit, after the flush (``python -m bench.commit_steps``: the
        step after the flush p50 3.6 -> 1.1 ms, p99 16.1 -> 7.7 ms with this record). Written with
        the transaction's first record instead, it joins together with the data partitions. The
        record restates the partition's committed progress and no runs, and carries a header the
        ingest skips (a reader without it sees a position the flow had committed already, which
        changes nothing).
        """
        if not self.exactly_once:
            return
        committed = state.committed if state.committed is not None else state.origin
        record = OffsetRunsRecord(state.range.topic, state.range.partition, state.topic_id, committed, ())
        self.producer.produce(self.job.history_topic, headers=OPENER_HEADERS, **record.as_produce_kwargs())

    def _history(self, state: PartitionState) -> list[OffsetRun]:
        """Produce the history record of ``state``; the runs it holds (accounted for only once the
        transaction commits)."""
        if state.acked:
            state.tracker.extend(state.produced, state.acked)
            state.produced.clear()
            state.acked.clear()
        runs = state.tracker.finish()
        # Interleaved skips (provenance) or gaps can make many runs: split into records far below 1 MB.
        for record in OffsetRunsRecord.batches(
            state.range.topic,
            state.range.partition,
            state.topic_id,
            state.next_offset,
            tuple((r.source_first, r.target_first, r.length) for r in runs),
        ):
            self.producer.produce(self.job.history_topic, **record.as_produce_kwargs())
        if self.job.mm2_syncs_on_target:
            pacer = self.pacers.setdefault(state.target, SyncPacer(self.job.flow.settings.offset_lag_max))
            for upstream, downstream in pacer.syncs(runs):
                sync = OffsetSync(state.range.topic, state.range.partition, upstream, downstream)
                self.producer.produce(self.job.mm2_syncs_on_target, **sync.as_produce_kwargs())
        return runs

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
        self.pacers.clear()
        if not self.exactly_once:
            return
        try:
            self.producer.abort_transaction(TXN_TIMEOUT_S)
        except Exception as exc:  # the producer is unusable; the next task builds a new one
            log.warning("aborting the transaction of %s failed (%s); dropping the producer", self._slot, exc)
            self._drop_producers()

    def release(self) -> None:
        """The task is over: delivery reports no longer belong to it."""
        for routed in self.producers:
            routed.router.sink = None

    def _drop_producers(self) -> None:
        """The producer failed: this writer is done, the next one initialises the slot afresh."""
        self.usable = False
        for routed in self.producers:
            self.cache.drop_producer(self._key(routed.transactional_id))

    # --- transaction calls --------------------------------------------------------------------
    @property
    def _slot(self) -> str:
        return self.producers[self.turn].transactional_id if self.producers else self.job.transactional_id

    def _retry(self, call: Callable[[], T], slot: str | None = None) -> T:
        """``call()``, repeated while it fails with a retriable error (for up to RETRY_FOR_S)."""
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + RETRY_FOR_S
        while True:
            try:
                return call()
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if error is None or not error.retriable() or time.monotonic() > deadline:
                    raise
                log.warning("%s: %s (retrying)", slot or self._slot, error.str())
                time.sleep(0.2)

    def _transactional(self, call: Callable[[], None]) -> None:
        """A call inside the open transaction: retriable errors repeat it, abortable ones abort."""
        from confluent_kafka import KafkaException

        try:
            self._retry(call)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if error is not None and error.txn_requires_abort() and not error.fatal():
                log.warning("%s: %s; aborting the transaction", self._slot, error.str())
                raise TransactionAborted(error.str()) from None
            raise

    # --- errors ------------------------------------------------------------------------------
    def _write_error(self, error: Any, state: PartitionState, offset: int, size: int) -> ReplicationError:
        return write_error(
            error,
            target_cluster=self.job.target,
            target_topic=state.range.target_topic,
            partition=state.range.partition,
            source_cluster=self.job.source,
            topic=state.range.topic,
            offset=offset,
            size=size,
            remote_prefix=self.job.flow.policy.format_remote_topic(self.job.source.alias, ""),
        )

    def _record_error(self, exc: Exception, state: PartitionState, offset: int, size: int) -> ReplicationError:
        return self._write_error(kafka_error(exc), state, offset, size)

    @property
    def transaction_topics(self) -> list[str]:
        """The target topics this writer copies into, and the flow's history and progress topics."""
        return [*sorted({topic for topic, _ in self.by_target}), self.job.history_topic, self.job.progress_topic]

    def _api_error(self, exc: Exception, doing: str) -> ReplicationError:
        """A failed transaction call: the producer is dropped, so the next task starts afresh."""
        self._drop_producers()
        error = kafka_error(exc)
        name = code_name(error)
        if name in FENCED:
            return ProducerFencedError(
                f"{self._slot} on {self.job.target.alias} was fenced while {doing}: a newer writer of this "
                "slot or a newer owner of the flow took over; the open transaction is aborted"
            )
        if name in KNOWN_WRITE_ERRORS:
            return transaction_error(error, self.job.source, self.job.target, doing, self.transaction_topics)
        detail = error.str() if hasattr(error, "str") else str(error)
        return ReplicationError(
            f"{doing} on {self.job.target.alias} ({self.job.target.describe()}) failed for {self._slot}: {detail}"
        )


class ProducerFencedError(ReplicationError):
    """This slot's producer was fenced: the copier checks who owns the flow now."""
