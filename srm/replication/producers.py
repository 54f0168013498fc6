"""A slot's producers on the target, kept in a Spark worker's client cache between tasks.

Continuous mode with exactly_once alternates two transactional producers of the slot (ids
``<slot>`` and ``<slot>.alt``): the next transaction starts on the other one at once. With one
producer, the first records after a commit ask the coordinator to add their partitions while it is
still writing the previous commit's markers; it answers CONCURRENT_TRANSACTIONS and librdkafka tries
again 20 ms later, a wait every record of that transaction pays. A commit returns once its outcome
is decided (PrepareCommit), so the other producer's records land after it in every partition, in
order. Both are initialised when the pair is built, before the copier reads the ownership record
(the fencing protocol).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple, Protocol

from srm.kafka import clients
from srm.replication.clientcache import ClientCache

log = logging.getLogger(__name__)

PRODUCER_SETTINGS = {
    "linger.ms": 5,
    "batch.size": 1_000_000,
    # What librdkafka may hold before the broker acknowledges it: 100 ms of the brokers' limit
    # here is ~25 MB at 1 KiB records; more only adds memory (the default is 1 GiB).
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 64 * 1024,
    "transaction.timeout.ms": 120_000,
}


# A lingering copier's producer holds a partition's records at most this long (well under
# message.timeout.ms, at least 5 s, which librdkafka requires to exceed linger.ms).
LINGER_CAP_MS = 1_000


def producer_settings(linger_ms: int) -> dict[str, Any]:
    """PRODUCER_SETTINGS for a copier whose transactions stay open ``linger_ms`` at least
    (transaction.linger.ms; 0: none). librdkafka sends each partition's records in a Produce
    request of its own, so with a 5 ms linger a steady load became several requests per partition
    per transaction, each with its own verification work on the leader. A transaction that stays
    open anyway holds them as long (up to LINGER_CAP_MS), and the commit's flush sends what is
    left: about one request per partition per transaction (bench.soak's shape, 5,000 records/s
    over 64 partitions, a 100 ms linger: 655 Produce requests a second on the target against 2,480)."""
    if linger_ms <= 0:
        return dict(PRODUCER_SETTINGS)
    return {**PRODUCER_SETTINGS, "linger.ms": min(linger_ms, LINGER_CAP_MS)}


def delivery_timeout_ms(retry_timeout_ms: int) -> int:
    """librdkafka's message.timeout.ms for a flow: a record that is not acknowledged within the
    flow's errors.retry.timeout fails its transaction then, not after the transaction time-out
    (librdkafka caps it there); between 5 s and PRODUCER_SETTINGS' transaction.timeout.ms."""
    cap = int(PRODUCER_SETTINGS["transaction.timeout.ms"])
    return cap if retry_timeout_ms < 0 else max(5_000, min(cap, retry_timeout_ms))


class DeliverySink(Protocol):
    def on_delivery(self, error: Any, message: Any) -> None: ...


class Router:
    """Delivery reports of a cached producer go to whichever writer uses it now."""

    def __init__(self) -> None:
        self.sink: DeliverySink | None = None

    def delivered(self, error: Any, message: Any) -> None:
        if self.sink is not None:
            self.sink.on_delivery(error, message)


class RoutedProducer(NamedTuple):
    """What the client cache keeps per transactional id: the producer and its reports' router."""

    producer: Any
    router: Router
    transactional_id: str

    def close(self) -> None:
        """Within a bounded time whatever the target does (srm.kafka.clients.close_producer)."""
        self.router.sink = None
        clients.close_producer(self.producer)

    def abandon(self) -> None:
        """The producer failed: dropped without waiting for the target (srm.kafka.clients.abandon_producer)."""
        self.router.sink = None
        clients.abandon_producer(self.producer)


class ProducerPair:
    """The slot's producers (one, or two taking turns), built through ``cache`` by ``build`` under
    the cache key ``key(transactional id)``, their delivery reports routed to ``sink``."""

    def __init__(
        self,
        cache: ClientCache,
        ids: tuple[str, ...],
        key: Callable[[str], str],
        build: Callable[[str], RoutedProducer],
        sink: DeliverySink,
        *,
        digest: str = "",
    ) -> None:
        self.cache = cache
        self.key = key
        self.turn = 0
        self.producers: list[RoutedProducer] = []  # filled one by one: a failure drops those built
        self._ids = ids
        self._build = build
        self._sink = sink
        self._digest = digest  # of the target's client settings (ClientCache)

    def start(self) -> None:
        for tid in self._ids:
            self.producers.append(self.cache.producer(self.key(tid), partial(self._build, tid), self._digest))
        for routed in self.producers:
            routed.router.sink = self._sink

    @property
    def producer(self) -> Any:
        """The producer whose turn it is."""
        return self.producers[self.turn].producer

    @property
    def transactional_id(self) -> str | None:
        return self.producers[self.turn].transactional_id if self.producers else None

    def advance(self) -> None:
        """A transaction committed: the next one on the other producer."""
        self.turn = (self.turn + 1) % len(self.producers)

    def release(self) -> None:
        """The writer is done: delivery reports no longer belong to it."""
        for routed in self.producers:
            routed.router.sink = None

    def drop(self) -> None:
        """The producers failed: abandoned and out of the cache, the next writer builds them afresh."""
        for routed in self.producers:
            self.cache.drop_producer(self.key(routed.transactional_id))
