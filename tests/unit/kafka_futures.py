"""The futures an admin client of a pretend cluster hands out: already answered."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from confluent_kafka import KafkaError, KafkaException


def done(value: Any = None, error: KafkaError | None = None) -> Future[Any]:
    """A future holding ``value``, or failed with ``error`` as librdkafka fails one."""
    future: Future[Any] = Future()
    if error is not None:
        future.set_exception(KafkaException(error))
    else:
        future.set_result(value)
    return future
