"""A record the producer refused: produced again once its local queue has room, or once its
metadata has the record's partition (a remote topic that grew), else what the failure means."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from tenacity import Retrying, retry_if_result, stop_after_delay, wait_fixed

from srm.replication.kafka_errors import code_name, kafka_error
from srm.replication.partition_state import PartitionState


class Writer(Protocol):
    """What a resend uses of srm.replication.writer.TargetWriter."""

    producer: Any
    reporters: dict[PartitionState, Callable[[Any, Any], None]]
    exactly_once: bool
    deliveries: Any

    def flush(self) -> None: ...


# A partition added to a remote topic reaches the metadata of the target's brokers within this.
METADATA_WAIT_S = 10.0
METADATA_POLL_S = 0.1
METADATA_CALL_S = 2.0


def send_again(
    writer: Writer, state: PartitionState, message: Any, timestamp: int, headers: Any, *, refused: Exception
) -> None:
    """The producer refused a record with ``exc``: produce it once its local queue has room, or
    once its metadata has the record's partition (a remote topic that grew), else raise what
    the failure means."""
    exc = refused
    value = message.value()
    looked_up = False
    while True:
        if isinstance(exc, BufferError):  # local queue full: let delivery reports drain it
            writer.producer.poll(0.05)
        elif not looked_up and code_name(kafka_error(exc)) == "_UNKNOWN_PARTITION":
            looked_up = True
            if not learn_partition(writer, state.range.target_topic, state.range.partition):
                break
        else:
            break
        try:
            writer.producer.produce(
                state.range.target_topic,
                value,
                key=message.key(),
                partition=state.range.partition,
                on_delivery=writer.reporters[state],
                timestamp=timestamp if timestamp > 0 else 0,
                headers=headers,
            )
            return
        except Exception as again:
            exc = again
    if writer.exactly_once and code_name(kafka_error(exc)) == "_STATE":
        # A failed transaction refuses every later record ("Erroneous state"): the cause is in
        # a delivery report, received already or still to come; _flush collects it and raises
        # it instead. (Never after a fatal error: fenced.)
        writer.flush()
    raise writer.deliveries.write_error(kafka_error(exc), state, message.offset(), len(value) if value else 0) from None


def learn_partition(writer: Writer, topic: str, partition: int) -> bool:
    """A record refused as for an unknown partition: the producer's metadata of ``topic`` may
    predate the partitions the driver added to it before this lease (librdkafka renews it every
    topic.metadata.refresh.interval.ms, 5 minutes). Ask for the topic's metadata until it has
    ``partition``, up to METADATA_WAIT_S (a new partition reaches every broker's metadata
    within it); False if it never does: the partition is gone."""
    from confluent_kafka import KafkaException

    def knows() -> bool:
        with contextlib.suppress(KafkaException):  # the target does not answer: ask again
            found = writer.producer.list_topics(topic, timeout=METADATA_CALL_S).topics.get(topic)
            return found is not None and found.error is None and partition in found.partitions
        return False

    waits = Retrying(
        retry=retry_if_result(lambda known: not known),
        stop=stop_after_delay(METADATA_WAIT_S),
        wait=wait_fixed(METADATA_POLL_S),
        retry_error_callback=lambda _: False,
    )
    return bool(waits(knows))
