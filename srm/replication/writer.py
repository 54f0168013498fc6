"""Writing copied records to the target, committed together with progress and history.

Per chunk (a Kafka transaction when exactly_once): the records, then one history record per
partition in ``srm-offset-syncs.<source>.internal`` with the exact offset runs (and MM2
OffsetSyncs when that topic lives on the target), then the progress offsets through
``send_offsets_to_transaction``, then the commit. Either all of it is visible on the target or
none of it; a crash anywhere leaves an open transaction that the next writer of the same
transactional id aborts when it starts. Without exactly_once the same order is kept with an
idempotent producer and a plain offset commit after the flush: a crash between the two copies
the chunk again (at-least-once).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from srm import clients
from srm.errors import ReplicationError
from srm.records import OffsetRunsRecord, OffsetSync
from srm.replication.clientcache import ClientCache
from srm.replication.job import CopyJob
from srm.replication.kafka_errors import KNOWN_WRITE_ERRORS, write_error
from srm.replication.partition_state import PartitionState
from srm.replication.progress import encode_metadata, progress_group
from srm.replication.runs import mm2_syncs

log = logging.getLogger(__name__)

# Bounds of one transaction: the broker aborts transactions older than transaction.timeout.ms
# (librdkafka default 60 s), and a smaller transaction makes records visible sooner.
CHUNK_MAX_RECORDS = 200_000
CHUNK_MAX_BYTES = 128 * 1024 * 1024
CHUNK_MAX_SECONDS = 10.0
FLUSH_TIMEOUT_S = 120.0
TXN_TIMEOUT_S = 60.0
PRODUCER_SETTINGS = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    "queue.buffering.max.messages": 500_000,
    "transaction.timeout.ms": 120_000,
}


class _Router:
    """Delivery reports of a cached producer go to whichever task uses it now."""

    def __init__(self) -> None:
        self.sink: TargetWriter | None = None

    def delivered(self, error: Any, message: Any) -> None:
        if self.sink is not None:
            self.sink.on_delivery(error, message)


class TargetWriter:
    def __init__(self, job: CopyJob, cache: ClientCache) -> None:
        self.job = job
        self.cache = cache
        self.exactly_once = job.flow.settings.exactly_once
        self.producer, self.router = cache.producer(self._producer_key, self._build_producer)
        self.router.sink = self
        self.target_consumer = cache.client(("target", job.flow.name), self._build_target_consumer)
        self.by_target: dict[tuple[str, int], PartitionState] = {}
        self.in_transaction = False
        self.chunk_records = 0
        self.chunk_bytes = 0
        self.chunk_started = 0.0
        self.error: tuple[Any, PartitionState, int, int] | None = None

    @property
    def _producer_key(self) -> str:
        return self.job.transactional_id if self.exactly_once else f"idempotent:{self.job.transactional_id}"

    def _build_producer(self) -> tuple[Any, _Router]:
        router = _Router()
        settings: dict[str, Any] = {**PRODUCER_SETTINGS, "on_delivery": router.delivered}
        if self.exactly_once:
            settings["transactional.id"] = self.job.transactional_id
        else:
            settings["enable.idempotence"] = True
        producer = clients.producer(self.job.target, **settings)
        if self.exactly_once:
            try:
                producer.init_transactions(TXN_TIMEOUT_S)
            except Exception as exc:
                raise self._api_error(exc, "starting transactions") from None
        return producer, router

    def _build_target_consumer(self) -> Any:
        # Reads committed progress (read_committed makes librdkafka ask for stable offsets) and
        # provides the group metadata that send_offsets_to_transaction needs. Never subscribes.
        return clients.consumer(self.job.target, progress_group(self.job.flow.source))

    def track(self, states: list[PartitionState]) -> None:
        self.by_target = {s.target: s for s in states}

    # --- records -----------------------------------------------------------------------------
    def produce(self, state: PartitionState, message: Any, offset: int, timestamp: int) -> int:
        """Write one source record to the same partition of the target, CreateTime kept (the
        copy loop's per-record path: keep it lean, see bench/REPORT.md "Profile"). Returns the value's size."""
        value = message.value()
        value_size = len(value) if value else 0
        if not self.in_transaction and self.exactly_once:
            self._begin()
        r = state.range
        while True:
            try:
                self.producer.produce(
                    r.target_topic,
                    value,
                    key=message.key(),
                    partition=r.partition,
                    timestamp=timestamp if timestamp > 0 else 0,  # 0: now, for a record without one
                    headers=message.headers(),
                )
                break
            except BufferError:  # local queue full: let delivery reports drain it
                self.producer.poll(0.05)
            except Exception as exc:
                raise self._record_error(exc, state, offset, value_size) from None
        state.produced.append(offset)
        if timestamp > 0:
            state.stamps.append(timestamp)
        self.chunk_records += 1
        self.chunk_bytes += value_size
        return value_size

    def on_delivery(self, error: Any, message: Any) -> None:
        state = self.by_target.get((message.topic(), message.partition()))
        if state is None:
            return  # the history record or an MM2 sync
        if error is None:
            state.acked.append(message.offset())
            return
        # A broker rejects a whole batch of records at once: name the largest one, which for
        # "record too large" is the culprit.
        source_offset = state.produced[len(state.acked)]
        state.acked.append(-1)  # keeps acked[i] aligned with produced[i]; the commit fails
        size = len(message.value() or b"")
        if self.error is None or size > self.error[3]:
            self.error = (error, state, source_offset, size)

    def chunk_full(self) -> bool:
        if not self.chunk_records:
            return False
        return (
            self.chunk_records >= CHUNK_MAX_RECORDS
            or self.chunk_bytes >= CHUNK_MAX_BYTES
            or time.monotonic() - self.chunk_started >= CHUNK_MAX_SECONDS
        )

    # --- commit ------------------------------------------------------------------------------
    def commit(self, states: list[PartitionState]) -> None:
        """Make everything produced so far, and the progress of ``states``, visible at once."""
        dirty = [s for s in states if s.dirty]
        if not dirty and not self.in_transaction:
            return
        if self.exactly_once and not self.in_transaction:
            self._begin()
        try:
            self._flush()
            offsets = [self._history(s) for s in dirty]
            if self.exactly_once:
                group = self.target_consumer.consumer_group_metadata()
                self.producer.send_offsets_to_transaction(offsets, group, TXN_TIMEOUT_S)
                self.producer.commit_transaction(TXN_TIMEOUT_S)
            else:
                self._flush()
                self.target_consumer.commit(offsets=offsets, asynchronous=False)
        except ReplicationError:
            self.abort()
            raise
        except Exception as exc:
            self.abort()
            raise self._api_error(exc, "committing a transaction") from None
        self.in_transaction = False
        # Latency: from a record's CreateTime until it is visible on the target, which for a
        # read_committed consumer is the commit (at-least-once: the acknowledgement before it).
        visible_ms = time.time() * 1000
        for state in dirty:
            state.committed = state.next_offset
            state.result.transactions += 1
            state.result.latency.add_ages(visible_ms, state.stamps)
            state.stamps.clear()
        self.chunk_records = self.chunk_bytes = 0

    def _begin(self) -> None:
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
            raise self._write_error(error, state, offset, size)
        if remaining:
            raise ReplicationError(
                f"{remaining} record(s) not acknowledged by {self.job.target.alias} within {FLUSH_TIMEOUT_S:.0f} s "
                f"({self.job.target.describe()}): is the cluster reachable?"
            )

    def _history(self, state: PartitionState) -> Any:
        from confluent_kafka import TopicPartition

        if state.acked:
            state.tracker.extend(state.produced, state.acked)
            result = state.result
            if result.target_first < 0:
                result.target_first = state.acked[0]
            result.target_last = state.acked[-1]
            state.produced.clear()
            state.acked.clear()
        runs = state.tracker.finish()
        state.result.runs.extend((r.source_first, r.target_first, r.length) for r in runs)
        record = OffsetRunsRecord(
            state.range.topic,
            state.range.partition,
            state.topic_id,
            state.next_offset,
            tuple((r.source_first, r.target_first, r.length) for r in runs),
        )
        self.producer.produce(self.job.history_topic, **record.as_produce_kwargs())
        if self.job.mm2_syncs_on_target:
            for upstream, downstream in mm2_syncs(runs):
                sync = OffsetSync(state.range.topic, state.range.partition, upstream, downstream)
                self.producer.produce(self.job.mm2_syncs_on_target, **sync.as_produce_kwargs())
        return TopicPartition(
            state.range.target_topic, state.range.partition, state.next_offset, metadata=encode_metadata(state.topic_id)
        )

    def abort(self) -> None:
        if not (self.exactly_once and self.in_transaction):
            return
        self.in_transaction = False
        try:
            self.producer.abort_transaction(TXN_TIMEOUT_S)
        except Exception as exc:  # the producer is unusable; the next task builds a new one
            log.warning(
                "aborting the transaction of %s failed (%s); dropping the producer", self.job.transactional_id, exc
            )
            self.cache.drop_producer(self._producer_key)

    def release(self) -> None:
        """The task is over: delivery reports no longer belong to it."""
        self.router.sink = None

    # --- errors ------------------------------------------------------------------------------
    def _write_error(self, error: Any, state: PartitionState, offset: int, size: int) -> ReplicationError:
        return write_error(
            error,
            target=self.job.target.alias,
            target_topic=state.range.target_topic,
            partition=state.range.partition,
            source=self.job.source.alias,
            topic=state.range.topic,
            offset=offset,
            size=size,
        )

    def _record_error(self, exc: Exception, state: PartitionState, offset: int, size: int) -> ReplicationError:
        error = exc.args[0] if exc.args else exc
        return self._write_error(error, state, offset, size)

    def _api_error(self, exc: Exception, doing: str) -> ReplicationError:
        """A failed transaction call: the producer is dropped, so the next task starts afresh."""
        self.cache.drop_producer(self._producer_key)
        error = exc.args[0] if exc.args else exc
        name = error.name() if hasattr(error, "name") else ""
        if name in KNOWN_WRITE_ERRORS:
            return write_error(
                error,
                target=self.job.target.alias,
                target_topic=self.job.history_topic,
                partition=0,
                source=self.job.source.alias,
                topic="(transaction)",
                offset=-1,
                size=0,
            )
        detail = error.str() if hasattr(error, "str") else str(error)
        return ReplicationError(
            f"{doing} on {self.job.target.alias} ({self.job.target.describe()}) failed for "
            f"{self.job.transactional_id}: {detail}"
        )
