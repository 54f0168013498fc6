"""Kafka clients kept alive in a Spark Python worker between tasks.

Spark reuses its Python workers, so a micro-batch every second would otherwise pay for new
connections and a transactional producer's initialisation (tens of milliseconds, more when it
must fence a predecessor) on every task. Producers are keyed by transactional id, consumers and
admin clients by flow. A fenced or failed producer is dropped and rebuilt on the next task. Each
client is kept with the digest of the settings it was built from (srm.kafka.clients.settings_digest):
asked for with another digest (a rotated password, a new bootstrap list), it is closed and built
again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from functools import partial
from typing import Any

# Each librdkafka client runs threads and holds connections: keep the number of cached producers
# (one per transactional id: two per slot in continuous mode) bounded; the least recently used is
# closed first.
MAX_PRODUCERS = 16


class ClientCache:
    """Clients are built outside the cache's lock (building a transactional producer may wait for
    its target for as long as the flow's errors.retry.timeout allows); two threads that build the
    same client at once keep the first and close the other."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._producers: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self._others: dict[tuple[str, ...], tuple[str, Any]] = {}

    def producer(self, key: str, build: Callable[[], Any], digest: str = "") -> Any:
        with self._lock:
            kept = self._producers.get(key)
            if kept is not None and kept[0] == digest:
                self._producers.move_to_end(key)
                return kept[1]
            stale = self._producers.pop(key, None)  # built from other settings
        if stale is not None:
            _close(stale[1])
        client = build()
        evicted = []
        with self._lock:
            kept = self._producers.get(key)
            if kept is not None and kept[0] == digest:  # built meanwhile by another thread
                evicted.append(client)
                client = kept[1]
            else:
                self._producers[key] = (digest, client)
            while len(self._producers) > MAX_PRODUCERS:
                evicted.append(self._producers.popitem(last=False)[1][1])
        for old in evicted:
            _close(old)
        return client

    def drop_producer(self, key: str) -> None:
        """A producer that failed: abandoned (not waiting for its target), not closed."""
        with self._lock:
            kept = self._producers.pop(key, None)
        if kept is not None:
            abandon = getattr(kept[1], "abandon", None)
            (abandon or partial(_close, kept[1]))()

    def client(self, key: tuple[str, ...], build: Callable[[], Any], digest: str = "") -> Any:
        with self._lock:
            kept = self._others.get(key)
            if kept is not None and kept[0] == digest:
                return kept[1]
            stale = self._others.pop(key, None)  # built from other settings
        if stale is not None:
            _close(stale[1])
        client = build()
        with self._lock:
            kept = self._others.get(key)
            if kept is not None and kept[0] == digest:  # built meanwhile by another thread
                extra, client = client, kept[1]
            else:
                extra = None
                self._others[key] = (digest, client)
        if extra is not None:
            _close(extra)
        return client

    def drop_client(self, key: tuple[str, ...]) -> None:
        with self._lock:
            kept = self._others.pop(key, None)
        if kept is not None:
            _close(kept[1])


def _close(client: Any) -> None:
    close = getattr(client, "close", None)
    if close is not None:
        close()


CACHE = ClientCache()
