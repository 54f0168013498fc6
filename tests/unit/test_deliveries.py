"""What a transaction's delivery reports mean, without a broker (srm.replication.deliveries): the
record that names a failure, a transient failure aborting the transaction within the flow's retry
bound, a deleted remote topic ending the run, and the records a failed transaction would hold
purged instead of waited for."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from srm.errors import RemoteTopicGoneError, ReplicationError
from srm.replication.deliveries import Deliveries, TransactionAborted
from srm.replication.outage import Outage
from tests.unit.test_writer import REMOTE, job, partition_state


@dataclass
class Message:
    _value: bytes

    def value(self) -> bytes:
        return self._value


@dataclass
class Producer:
    """A producer whose transaction is healthy (begin_transaction: a state error) or ``failed``,
    holding ``queued`` records until they are purged."""

    queued: int = 0
    failed: KafkaError | None = None
    purges: list[bool] = field(default_factory=list)  # in_flight of each purge

    def flush(self, timeout: float = 0) -> int:
        return self.queued

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        self.purges.append(in_flight)
        self.queued = 0

    def begin_transaction(self) -> None:
        raise KafkaException(self.failed or KafkaError(KafkaError._STATE, "Operation not valid in state InTransaction"))


class Target:
    """What the target answers about the remote topic."""

    def __init__(self, exists: bool) -> None:
        self.exists = exists

    def list_topics(self, topic: str, timeout: float) -> Any:
        error = None if self.exists else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
        meta = type("TopicMetadata", (), {"error": error})()
        return type("ClusterMetadata", (), {"topics": {topic: meta}})()


def deliveries(*, topic_exists: bool = True) -> tuple[Deliveries, Any, Outage]:
    copy_job = job(continuous=True)
    outage = Outage()
    found = Deliveries(lambda: copy_job, outage, 30_000, Target(topic_exists), lambda: "slot 0")
    state = partition_state(copy_job)
    state.produced.extend([10, 11, 12])
    return found, state, outage


def test_a_record_the_target_refused_names_the_failure_not_a_larger_one_purged_after_it() -> None:
    found, state, _ = deliveries()
    found.undelivered(state, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), Message(b"x" * 100))
    found.undelivered(state, KafkaError(KafkaError._PURGE_QUEUE), Message(b"x" * 5000))
    found.undelivered(state, KafkaError(KafkaError.MSG_SIZE_TOO_LARGE), Message(b"x" * 2000))
    with pytest.raises(ReplicationError) as raised:
        found.flush(Producer(), in_transaction=True)
    message = str(raised.value)
    assert f"'{REMOTE}'" in message and "offset 12" in message and "2000" in message, message
    assert list(state.acked) == [-1, -1, -1], "the commit fails: no record counts as delivered"


def test_a_timed_out_record_aborts_the_transaction_and_counts_its_delivery_time_out_against_the_bound() -> None:
    found, state, outage = deliveries()
    found.undelivered(state, KafkaError(KafkaError._MSG_TIMED_OUT), Message(b"v"))
    with pytest.raises(TransactionAborted) as raised:
        found.flush(Producer(), in_transaction=True)
    assert raised.value.waited_s == 30.0
    assert outage.ongoing and found.failure is None, "the next transaction starts with no failure kept"


def test_a_timed_out_record_of_a_remote_topic_deleted_from_the_target_ends_the_run() -> None:
    found, state, _ = deliveries(topic_exists=False)
    found.undelivered(state, KafkaError(KafkaError._MSG_TIMED_OUT), Message(b"v"))
    with pytest.raises(RemoteTopicGoneError, match=f"'{REMOTE}'"):
        found.flush(Producer(), in_transaction=True)


def test_records_of_a_failed_transaction_are_purged_and_its_own_error_named() -> None:
    found, state, _ = deliveries()
    refused = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed", txn_requires_abort=True)
    producer = Producer(queued=3, failed=refused)
    # what librdkafka reports for the purged records
    found.undelivered(state, KafkaError(KafkaError._PURGE_QUEUE), Message(b"v"))
    with pytest.raises(ReplicationError, match=f"not authorized to write topic '{REMOTE}'"):
        found.flush(producer, in_transaction=True)
    assert producer.purges == [False], "the queue purged once, what is in flight left to its broker"


def test_a_healthy_transaction_is_waited_for_not_purged() -> None:
    found, _, _ = deliveries()
    producer = Producer(queued=2)

    def flush(timeout: float = 0) -> int:
        producer.queued -= 1  # one acknowledged per slice
        return producer.queued

    producer.flush = flush  # type: ignore[method-assign]
    found.flush(producer, in_transaction=True)
    assert producer.purges == [] and producer.queued == 0
