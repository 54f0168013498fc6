"""The soak's load: sequence-numbered records at a steady rate over every partition of its topics.

Each record's value starts with its partition's sequence number (8 bytes, big-endian; the rest is
padding to RECORD_SIZE), so the checker can tell a duplicate, a reordering or a gap on the target
from the value alone. The producer is idempotent: a broker restart neither duplicates nor reorders
what it sends. Records whose delivery failed for good are remembered: the source does not hold
them, so the target must not either, and their absence is no loss.
"""

from __future__ import annotations

import struct
import threading
import time
from collections import defaultdict
from typing import Any

from srm.config.model import Cluster
from srm.kafka import clients

RECORD_SIZE = 100
SEQUENCE = struct.Struct(">q")
TICK_S = 0.005  # the producer writes what is due every tick

Key = tuple[str, int]


def encode(sequence: int) -> bytes:
    return SEQUENCE.pack(sequence).ljust(RECORD_SIZE, b".")


def decode(value: bytes | None) -> int:
    """The record's sequence number; -1 when the value is not one of the load's."""
    if value is None or len(value) < SEQUENCE.size:
        return -1
    return int(SEQUENCE.unpack_from(value)[0])


class Part(threading.Thread):
    """A thread of the soak's own (the load, the checker) that keeps what ended it in ``error``:
    the soak checks it every minute and stops with it."""

    error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:
            self.error = exc
            raise

    def work(self) -> None:
        raise NotImplementedError


class Load(Part):
    """Writes ``rate`` records/s spread evenly over ``partitions()`` (the topics and partition counts
    of the moment: faults add some) until ``stop`` is set."""

    def __init__(self, source: Cluster, rate: int, partitions: Any) -> None:
        super().__init__(name="soak-load", daemon=True)
        # Partitions added during the run are learnt within 10 s (librdkafka: every 5 min by default).
        settings = {"enable.idempotence": True, "linger.ms": 5, "topic.metadata.refresh.interval.ms": 10_000}
        self.producer = clients.producer(source, **settings)
        self.rate = rate
        self.partitions = partitions  # () -> dict[str, int]
        self.stop = threading.Event()
        self.next_seq: dict[Key, int] = defaultdict(int)
        self.failed: dict[Key, set[int]] = defaultdict(set)
        self.acked: dict[Key, int] = {}  # highest sequence acknowledged per partition
        self.sent = 0
        self._lock = threading.Lock()

    def work(self) -> None:
        started, written = time.monotonic(), 0
        while not self.stop.is_set():
            keys = [(t, p) for t, n in sorted(self.partitions().items()) for p in range(n)]
            due = int((time.monotonic() - started) * self.rate)
            while written < due and keys:
                self._send(keys[written % len(keys)])
                written += 1
            self.producer.poll(0)
            time.sleep(TICK_S)
        self.producer.flush(120)

    def _send(self, key: Key) -> None:
        from confluent_kafka import KafkaException

        sequence = self.next_seq[key]

        def delivered(error: Any, message: Any) -> None:
            with self._lock:
                if error is None:
                    self.acked[key] = max(self.acked.get(key, -1), sequence)
                else:
                    self.failed[key].add(sequence)

        while True:
            try:
                self.producer.produce(key[0], encode(sequence), partition=key[1], on_delivery=delivered)
                break
            except BufferError:  # a broker is down: wait for room instead of dropping the record
                self.producer.poll(0.1)
            except KafkaException as exc:
                if exc.args[0].name() != "_UNKNOWN_PARTITION":
                    raise
                return  # a partition just added, not in the producer's metadata yet: its turn comes again
        self.next_seq[key] = sequence + 1
        self.sent += 1

    def delivered(self) -> dict[Key, int]:
        """Per partition, the highest sequence number the source acknowledged."""
        with self._lock:
            return dict(self.acked)

    def lost_on_the_way(self) -> dict[Key, set[int]]:
        """Sequence numbers the source never acknowledged (not on the source: no loss if missing)."""
        with self._lock:
            return {k: set(v) for k, v in self.failed.items()}
