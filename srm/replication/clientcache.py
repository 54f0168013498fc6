"""Kafka clients kept alive in a Spark Python worker between tasks.

Spark reuses its Python workers, so a micro-batch every second would otherwise pay for new
connections and a transactional producer's initialisation (tens of milliseconds, more when it
must fence a predecessor) on every task. Producers are keyed by transactional id, consumers and
admin clients by flow. A fenced or failed producer is dropped and rebuilt on the next task.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

# Each librdkafka client runs threads and holds connections: keep the number of cached producers
# (one per transactional id: two per slot in continuous mode) bounded; the least recently used is
# closed first.
MAX_PRODUCERS = 16


class ClientCache:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._producers: OrderedDict[str, Any] = OrderedDict()
        self._others: dict[tuple[str, ...], Any] = {}

    def producer(self, key: str, build: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._producers:
                self._producers.move_to_end(key)
                return self._producers[key]
            client = build()
            self._producers[key] = client
            while len(self._producers) > MAX_PRODUCERS:
                _, evicted = self._producers.popitem(last=False)
                evicted.close()
            return client

    def drop_producer(self, key: str) -> None:
        with self._lock:
            client = self._producers.pop(key, None)
        if client is not None:
            client.close()

    def client(self, key: tuple[str, ...], build: Callable[[], Any]) -> Any:
        with self._lock:
            if key not in self._others:
                self._others[key] = build()
            return self._others[key]

    def drop_client(self, key: tuple[str, ...]) -> None:
        with self._lock:
            client = self._others.pop(key, None)
        close = getattr(client, "close", None)
        if close is not None:
            close()


CACHE = ClientCache()
