"""The delivery reports of a transaction's records, and what a failure among them means.

librdkafka reports each record's fate to a callback; a broker refuses a whole batch at once, and
after an abortable transaction error it purges what it still holds. :class:`Deliveries` keeps the
one failed record that names the failure (one the target refused, the largest first: for "record
too large" that is the culprit), waits for every report within FLUSH_TIMEOUT_S, and turns the
failure into what the copier does next: TransactionAborted (transient: the transaction is copied
again within the flow's errors.retry.timeout), RemoteTopicGoneError (the remote topic was deleted)
or a ReplicationError that names the target topic, partition, source offset and the fix.

The producer is passed in with each call: the writer's producer of the turn changes at every
commit (:mod:`.producers`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from srm.errors import ReplicationError
from srm.kafka.retry import RETRIABLE
from srm.replication.job import CopyJob
from srm.replication.kafka_errors import (
    GONE,
    KNOWN_WRITE_ERRORS,
    REFINED,
    TRANSACTION_SAYS_MORE,
    code_name,
    gone_error,
    kafka_error,
    write_error,
)
from srm.replication.outage import Outage
from srm.replication.partition_state import PartitionState

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 120.0
FLUSH_SLICE_S = 1.0  # a flush that waits longer looks whether the transaction failed meanwhile
# Records librdkafka dropped from its queue: after an abortable transaction error, or on close.
PURGED = ("_PURGE_QUEUE", "_PURGE_INFLIGHT")
# Delivery failures that a later attempt can get past (the target's broker was down or a leader
# moved for longer than librdkafka retried): the transaction is aborted and copied again.
# The errors any call retries (srm.kafka.retry.RETRIABLE: timeouts, transport, leaders moving), and
# those only a delivery meets.
TRANSIENT = (*RETRIABLE, "_MSG_TIMED_OUT", "NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", *PURGED)
TIMED_OUT = ("_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT")


class TransactionAborted(Exception):
    """The open transaction was aborted after an abortable error: rewind to the committed progress.
    ``waited_s``: how long what failed had been waiting (a record's delivery time-out)."""

    def __init__(self, cause: str, waited_s: float = 0.0) -> None:
        super().__init__(cause)
        self.waited_s = waited_s


def rank(error: Any, size: int) -> tuple[bool, int]:
    """Which failed record names the failure: one the target refused, the largest first."""
    return code_name(error) not in PURGED, size


def transaction_error(producer: Any) -> Any:
    """The error the producer's open transaction failed with (abortable or fatal), or None.

    begin_transaction is the transactional call without side effects: inside a transaction it
    only fails, with the transaction's own error when it has one, a state error when it is healthy.
    Call it only inside a transaction (outside, it would begin one)."""
    from confluent_kafka import KafkaException

    try:
        producer.begin_transaction()
    except KafkaException as exc:
        error = kafka_error(exc)
        return error if error.txn_requires_abort() or error.fatal() else None
    return None


def failed_transaction(producer: Any) -> Any:
    """Why the producer's transaction failed, when its records say less (purged, or
    TRANSACTION_SAYS_MORE) and the transaction's error names a cause the user can fix, or None.
    An abortable transaction error (a partition that could not be added to the transaction, e.g.
    TOPIC_AUTHORIZATION_FAILED) purges the queued records and is reported only by the next
    transactional call."""
    cause = transaction_error(producer)
    return cause if cause is not None and code_name(cause) in REFINED else None


class Deliveries:
    """The reports of one slot writer's records (``job``: the writer's job now, renewed with its
    leases; ``slot``: its transactional id now, for the log)."""

    def __init__(
        self,
        job: Callable[[], CopyJob],
        outage: Outage,
        delivery_timeout_ms: int,
        target_consumer: Any,
        slot: Callable[[], str],
    ) -> None:
        self._job = job
        self.exactly_once = job().flow.settings.exactly_once
        self.outage = outage
        self.delivery_timeout_ms = delivery_timeout_ms
        self.target_consumer = target_consumer  # asks the target whether a remote topic exists
        self.slot = slot
        self.failure: tuple[Any, PartitionState, int, int] | None = None  # error, state, source offset, size

    @property
    def job(self) -> CopyJob:
        return self._job()

    def undelivered(self, state: PartitionState, error: Any, message: Any) -> None:
        """A record of ``state`` failed: keep it if it names the failure better than the one kept."""
        source_offset = state.produced[len(state.acked)] if len(state.acked) < len(state.produced) else -1
        state.acked.append(-1)  # keeps acked[i] aligned with produced[i]; the commit fails
        size = len(message.value() or b"")
        if self.failure is None or rank(error, size) > rank(self.failure[0], self.failure[3]):
            self.failure = (error, state, source_offset, size)

    def flush(self, producer: Any, in_transaction: bool) -> None:
        """Every record delivered, or raise what the failure means (after which the writer aborts)."""
        remaining = self._wait(producer, in_transaction)
        if self.failure is not None:
            error, state, offset, size = self.failure
            self.failure = None
            if self.exactly_once and error.name() in (*PURGED, *TRANSACTION_SAYS_MORE):
                error = failed_transaction(producer) or error
            if error.name() in GONE or (error.name() in TRANSIENT and self._topic_gone(state.range.target_topic)):
                raise self.write_error(gone_error(error), state, offset, size)  # no retry brings it back
            if error.name() in TRANSIENT or (error.retriable() and error.name() not in KNOWN_WRITE_ERRORS):
                if not self.outage.ongoing:  # then once a minute, by the outage
                    log.warning("%s: a record was not written (%s); aborting the transaction", self.slot(), error.str())
                # A record that timed out waited its whole delivery time-out for the target.
                waited = self.delivery_timeout_ms / 1000 if error.name() in TIMED_OUT else 0.0
                self.outage.began(error.str(), waited)  # the abort that follows waits no longer than the bound
                raise TransactionAborted(error.str(), waited)
            raise self.write_error(error, state, offset, size)
        if remaining:
            raise ReplicationError(
                f"{remaining} record(s) not acknowledged by {self.job.target.alias} within {FLUSH_TIMEOUT_S:.0f} s "
                f"({self.job.target.describe()}): is the cluster reachable?"
            )

    def _wait(self, producer: Any, in_transaction: bool) -> int:
        """Wait up to FLUSH_TIMEOUT_S for the report of every record; how many are missing.

        A transaction that failed meanwhile (an abortable error: the target refused to add a
        partition to it, e.g. TOPIC_AUTHORIZATION_FAILED) never sends the records still queued for
        the partitions it had not added yet: they would wait out their delivery time-out. Once it
        has failed they are purged, so their reports, and the failure, come at once."""
        deadline = time.monotonic() + FLUSH_TIMEOUT_S
        probe = self.exactly_once and in_transaction
        while True:
            remaining = producer.flush(min(FLUSH_SLICE_S, max(0.0, deadline - time.monotonic())))
            if not remaining or time.monotonic() >= deadline:
                return int(remaining)
            if probe and transaction_error(producer) is not None:
                producer.purge(in_queue=True, in_flight=False, blocking=False)
                probe = False

    def _topic_gone(self, topic: str) -> bool:
        """Whether the target answers that ``topic`` does not exist (a record of a deleted topic
        may time out rather than fail with UNKNOWN_TOPIC_OR_PART)."""
        from confluent_kafka import KafkaError

        try:
            found = self.target_consumer.list_topics(topic, timeout=5).topics.get(topic)
        except Exception:  # the target does not answer: a transient fault
            return False
        return found is not None and found.error is not None and found.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART

    def write_error(self, error: Any, state: PartitionState, offset: int, size: int) -> ReplicationError:
        """``error`` of a record of ``state`` at source ``offset``, named for the user."""
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
