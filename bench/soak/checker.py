"""The soak's checker: reads the target read_committed while the run goes on and checks, per
partition, that the sequence numbers arrive once each and in order.

A record whose sequence number is not above the partition's last one is a duplicate (or out of
order); a jump over numbers is a gap, counted as lost at the end unless the source never
acknowledged those records (the load knows). Arrivals also give the latency of each record
(arrival - CreateTime, one clock) per minute, and tell when the copy went on after a fault: the
first record created after the fault's end that arrives.
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from bench.soak.load import Key, Part, decode
from srm.config.model import Cluster
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.topics import partition_counts

log = logging.getLogger("bench.soak")
REFRESH_S = 5.0  # how often new remote topics and partitions are looked for


@dataclass
class PartitionCheck:
    last: int = -1
    received: int = 0
    duplicated: int = 0
    gaps: list[tuple[int, int]] = field(default_factory=list)  # [first, end) of numbers skipped


class Checker(Part):
    def __init__(self, target: Cluster, remote: Any) -> None:
        """``remote``: () -> {remote topic: source topic}, the topics to read."""
        super().__init__(name="soak-checker", daemon=True)
        self.target = target
        self.remote = remote
        self.admin = clients.admin_client(target)
        self.consumer = clients.consumer(target, "soak-checker", **{"auto.offset.reset": "earliest"})
        self.stop = threading.Event()
        self.partitions: dict[Key, PartitionCheck] = defaultdict(PartitionCheck)
        self.assigned: set[tuple[str, int]] = set()
        self.latencies: dict[int, array[float]] = defaultdict(lambda: array("d"))  # minute -> ms
        self.watches: list[tuple[float, threading.Event, list[float]]] = []  # (created after ms, done, arrival)
        self._lock = threading.Lock()

    def work(self) -> None:
        next_refresh = 0.0
        while not self.stop.is_set():
            if time.monotonic() >= next_refresh:
                try:
                    self._assign()
                except SrmError as exc:  # the target is down or frozen (a fault): next time
                    log.warning("checker: cannot look for new partitions: %s", exc)
                next_refresh = time.monotonic() + REFRESH_S
            first = self.consumer.poll(0.1)
            if first is None:
                continue
            self._check([first, *self.consumer.consume(10_000, 0)], time.time() * 1000)
        self.consumer.close()

    def _assign(self) -> None:
        from confluent_kafka import TopicPartition

        counts = partition_counts(self.admin)
        fresh = [(t, p) for t in self.remote() for p in range(counts.get(t, 0)) if (t, p) not in self.assigned]
        if fresh:
            self.consumer.incremental_assign([TopicPartition(t, p, 0) for t, p in fresh])
            self.assigned.update(fresh)

    def _check(self, messages: list[Any], arrived_ms: float) -> None:
        sources = self.remote()
        newest = 0.0
        with self._lock:
            for message in messages:
                if message.error() is not None:
                    continue
                created = message.timestamp()[1]
                newest = max(newest, created)
                self.latencies[int(arrived_ms // 60_000)].append(arrived_ms - created)
                sequence = decode(message.value())
                state = self.partitions[(sources.get(message.topic(), message.topic()), message.partition())]
                state.received += 1
                if sequence <= state.last:
                    state.duplicated += 1
                    continue
                if sequence > state.last + 1:
                    state.gaps.append((state.last + 1, sequence))
                state.last = sequence
            for created_after, done, arrival in self.watches:
                if not done.is_set() and newest >= created_after:
                    arrival.append(arrived_ms)
                    done.set()

    def watch(self, after_ms: float) -> tuple[threading.Event, list[float]]:
        """An event set when a record created at or after ``after_ms`` arrives (its arrival time in
        the list)."""
        done, arrival = threading.Event(), list[float]()
        with self._lock:
            self.watches.append((after_ms, done, arrival))
        return done, arrival

    def latencies_before(self, minute: int) -> list[float]:
        """The latencies of the records that arrived before wall-clock ``minute`` (minutes since
        the epoch) and were not taken yet."""
        with self._lock:
            done = [m for m in self.latencies if m < minute]
            return [value for m in done for value in self.latencies.pop(m)]

    def snapshot(self) -> dict[Key, PartitionCheck]:
        with self._lock:
            return {
                k: PartitionCheck(v.last, v.received, v.duplicated, list(v.gaps)) for k, v in self.partitions.items()
            }

    def caught_up(self, delivered: dict[Key, int]) -> bool:
        """Has every partition's last acknowledged record arrived?"""
        with self._lock:
            return all(self.partitions[k].last >= last for k, last in delivered.items())


def verdict(
    checks: dict[Key, PartitionCheck], delivered: dict[Key, int], failed: dict[Key, set[int]]
) -> dict[str, int]:
    """Records received, duplicated and lost over the whole run: a gap's numbers the source
    acknowledged, and acknowledged numbers past a partition's last arrival."""
    lost = 0
    for key, check in checks.items():
        dropped = failed.get(key, set())
        for first, end in check.gaps:
            lost += sum(1 for n in range(first, end) if n not in dropped)
    for key, last in delivered.items():
        seen = checks[key].last if key in checks else -1
        lost += sum(1 for n in range(seen + 1, last + 1) if n not in failed.get(key, set()))
    return {
        "records": sum(c.received for c in checks.values()),
        "duplicated": sum(c.duplicated for c in checks.values()),
        "lost": lost,
    }
