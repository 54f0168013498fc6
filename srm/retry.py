"""Retrying Kafka calls that fail with retriable errors (coordinator loading, leader moving...).

librdkafka retries produce and fetch requests itself, but admin requests and committed-offset
lookups surface retriable errors to the caller. These come in bursts right after a broker
starts or a coordinator moves and clear within seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from srm.errors import ClusterUnreachableError, SrmError

T = TypeVar("T")
# Coordinator loads and leader elections on a healthy cluster finish within seconds.
RETRY_FOR_S = 30.0
BACKOFF_S = 0.2


def retrying(call: Callable[[], T], what: str, timeout_s: float = RETRY_FOR_S) -> T:
    """``call()``; retriable KafkaExceptions are retried until ``timeout_s`` (then
    ClusterUnreachableError), others raise SrmError."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    backoff = BACKOFF_S
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0]
            retriable = _retriable(error)
            if retriable and time.monotonic() < deadline:
                time.sleep(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            detail = error.str() if hasattr(error, "str") else str(error)
            raise (ClusterUnreachableError if retriable else SrmError)(f"{what}: {detail}") from None


def _retriable(error: object) -> bool:
    retriable = getattr(error, "retriable", None)
    if callable(retriable) and retriable():
        return True
    name = getattr(error, "name", lambda: "")()
    return name in (
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
        "LEADER_NOT_AVAILABLE",
        "NOT_LEADER_OR_FOLLOWER",
        "_TIMED_OUT",
        "REQUEST_TIMED_OUT",
        "_TRANSPORT",
        "_ALL_BROKERS_DOWN",
    )
