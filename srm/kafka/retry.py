"""Retrying Kafka calls that fail with retriable errors (coordinator loading, leader moving...).

librdkafka retries produce and fetch requests itself, but admin requests and committed-offset
lookups surface retriable errors to the caller. These come in bursts right after a broker
starts or a coordinator moves and clear within seconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_delay, wait_exponential

from srm.errors import ClusterUnreachableError, SrmError

T = TypeVar("T")
# Coordinator loads and leader elections on a healthy cluster finish within seconds.
RETRY_FOR_S = 30.0
BACKOFF_S = 0.2  # the first wait; doubled after each attempt, up to MAX_BACKOFF_S
MAX_BACKOFF_S = 2.0
# Retried besides what librdkafka flags retriable, by librdkafka's names (KafkaError.name()).
RETRIABLE = (
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_FOR_PARTITION",  # librdkafka's name of Kafka's NOT_LEADER_OR_FOLLOWER
    "_TIMED_OUT",
    "REQUEST_TIMED_OUT",
    "_TRANSPORT",
    "_ALL_BROKERS_DOWN",
    # A broker restarted since the client learnt its partitions' leader epochs: the client's
    # requests carry the old epoch (see ``retrying``'s ``refresh``).
    "FENCED_LEADER_EPOCH",
    "UNKNOWN_LEADER_EPOCH",
    "_NOENT",  # an admin call's "Failed to query partition leaders: No leaders found" (an election)
)
# A topic or partition the cluster does not have (any more): deleted, or never created.
TOPIC_GONE = ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION")


def needs(admin: Any, operation: str, resource: str) -> str:
    """Who needs what for a call of ``admin`` (see ``srm.kafka.clients.admin_client``), for an ACL denial:
    ``User:srm (clusters.east) needs CREATE on TOPIC 'us-west.orders'``."""
    principal = getattr(admin, "srm_principal", "the client's principal")
    return f"{principal} needs {operation} on {resource}"


def acl_hint(error: Any, needed: str | None) -> str:
    """``error``'s text; for an authorization failure, what ACL is missing and where to look them up."""
    detail = str(error.str()) if hasattr(error, "str") else str(error)
    name = getattr(error, "name", lambda: "")()
    if name.endswith("AUTHORIZATION_FAILED"):
        detail += f" ({name}: {needed or 'an ACL is missing'}; `srm-control acls --source A --target B` lists a flow's)"
    return detail


def retrying(
    call: Callable[[], T],
    what: str,
    timeout_s: float = RETRY_FOR_S,
    *,
    cluster: str,
    needed: str | None = None,
    refresh: Callable[[], object] | None = None,
) -> T:
    """``call()``; retriable KafkaExceptions are retried until ``timeout_s`` (then
    ClusterUnreachableError), others raise SrmError. ``needed`` (see :func:`needs`) tells, on an
    authorization failure, which ACL the call needs; ``refresh`` renews the client's metadata
    before each further attempt; ``cluster``, the alias of the cluster called, is carried by the
    ClusterUnreachableError.

    An admin client's metadata (partition leaders and their epochs) is renewed only when asked:
    after a broker restart, a long-lived one kept sending the old leader epoch (refused with
    FENCED_LEADER_EPOCH) or kept the "no leader" it saw during the election, for minutes, while a
    new client succeeded at once (bench.soak, the target's broker restarted under a driver)."""
    from confluent_kafka import KafkaException

    def before_sleep(state: RetryCallState) -> None:
        if refresh is not None:
            with contextlib.suppress(KafkaException):  # the next attempt says what is wrong
                refresh()

    attempts = Retrying(
        retry=retry_if_exception(lambda exc: isinstance(exc, KafkaException) and is_retriable(exc.args[0])),
        stop=stop_after_delay(timeout_s),
        wait=wait_exponential(multiplier=BACKOFF_S, min=BACKOFF_S, max=MAX_BACKOFF_S),
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        return attempts(call)
    except KafkaException as exc:
        error = exc.args[0]
        detail = acl_hint(error, needed)
        if is_retriable(error):
            raise ClusterUnreachableError(f"{what}: {detail}", cluster=cluster) from None
        raise SrmError(f"{what}: {detail}") from None


def is_retriable(error: object) -> bool:
    """A KafkaError that clears by itself (librdkafka says so, or one of RETRIABLE)."""
    retriable = getattr(error, "retriable", None)
    if callable(retriable) and retriable():
        return True
    return getattr(error, "name", lambda: "")() in RETRIABLE
