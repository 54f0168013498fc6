"""Timing a copy the same way for every replicator: from the first record written to the target
until the last one is visible, by polling the target topics' end offsets (TargetWatch) or, for
copies of many small topics, by reading their records (RecordWatch).

The start is the first high watermark above 0 (read_uncommitted: a transactional writer's records
count as written before their commit, so ours is not credited with the time its first
transaction is open); the end is the last stable offset (read_committed) reaching ``expected``,
when a read_committed consumer could read everything. A transactional writer's end offsets also
count one commit marker per transaction and partition: ``expected`` is reached at most a few
markers early, noise at the benchmarks' sizes (thousands of records per transaction).
"""

from __future__ import annotations

import queue
import threading
import time
import uuid
from typing import Any

from srm.config.model import Cluster
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.kafka.topics import partition_counts

POLL_S = 0.1
ANSWER_TIMEOUT_S = 5.0


def visible_records(
    admin: Any, topics: dict[str, int], *, committed: bool = True, present: list[tuple[str, int]] | None = None
) -> int:
    """Sum of the end offsets of the ``topics`` (name -> partitions) that exist with all their
    partitions: last stable offsets, or high watermarks with ``committed=False``. ``present``: the
    partitions known to exist (the metadata is not asked again)."""
    present = present if present is not None else present_partitions(admin, topics)
    if not present:
        return 0
    try:
        ends = list_offsets(admin, present, "latest", read_committed=committed)
    except SrmError:  # just created: leaders are still being elected
        return 0
    return sum(ends.values())


def answered_end_offsets(admin: Any, present: list[tuple[str, int]], *, committed: bool) -> tuple[int, bool]:
    """Sum of the end offsets of those of ``present`` whose leaders answer at once, and whether
    every one did. Right after a topic of thousands of partitions is created their leaders refuse
    for seconds, and a ListOffsets retried until all answer (:func:`visible_records`) would let a
    whole copy pass unseen within one poll: a partition not answering yet counts 0 this time."""
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    if not present:
        return 0, False
    level = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in present}  # type: ignore[no-untyped-call]
    try:
        futures = admin.list_offsets(request, isolation_level=level, request_timeout=ANSWER_TIMEOUT_S)
    except KafkaException:  # the client's metadata has not got the topic yet
        return 0, False
    total, everyone = 0, True
    for future in futures.values():
        try:
            total += future.result(timeout=ANSWER_TIMEOUT_S).offset
        except (KafkaException, TimeoutError):
            everyone = False
    return total, everyone


def present_partitions(admin: Any, topics: dict[str, int]) -> list[tuple[str, int]]:
    """The partitions of those of ``topics`` (name -> partitions) that exist with all their partitions."""
    counts = partition_counts(admin)
    return [(t, p) for t, n in topics.items() if counts.get(t) == n for p in range(n)]


class TargetWatch(threading.Thread):
    """Started before the replicator: notes when the first record and when ``expected`` records
    are visible in ``topics`` (name -> partitions) on ``target``."""

    def __init__(self, target: Cluster, topics: dict[str, int], expected: int) -> None:
        super().__init__(daemon=True)
        self.target = target
        self.admin = clients.admin_client(target)
        self.topics, self.expected = topics, expected
        self.started = time.monotonic()
        self.first: float | None = None
        self.done: float | None = None
        self.seen = 0
        self.slowest_poll = 0.0  # the figures' resolution: a poll's own time, plus POLL_S
        self.none_at = self.started  # when a poll last began that every partition answered with no record
        self.within_one_poll = False  # the first record and the last one became visible between two polls
        self._stop_event = threading.Event()
        self.start()

    def run(self) -> None:
        everything = [(t, p) for t, n in self.topics.items() for p in range(n)]
        present: list[tuple[str, int]] = []
        while not self._stop_event.is_set():
            began = time.monotonic()
            if len(present) < len(everything):  # once all exist, their metadata is not asked again
                present = present_partitions(self.admin, self.topics)
            first_round = False
            if self.first is None:
                asked = time.monotonic()
                written, everyone = answered_end_offsets(self.admin, present, committed=False)
                if written:
                    self.first, first_round = time.monotonic(), True
                elif everyone:  # nothing anywhere when this poll began; a partition not answering proves nothing
                    self.none_at = asked
            self.seen = answered_end_offsets(self.admin, present, committed=True)[0]
            now = time.monotonic()
            self.slowest_poll = max(self.slowest_poll, now - began)
            if self.seen >= self.expected:
                self.done, self.within_one_poll = now, first_round
                return
            time.sleep(POLL_S)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)

    @property
    def copy_seconds(self) -> float | None:
        """First record written to the target until the last is visible (None until it is)."""
        if self.first is None or self.done is None:
            return None
        if self.within_one_poll:  # all of it between a poll that saw nothing and the next: at most that span
            return self.done - self.none_at
        return max(self.done - self.first, POLL_S)

    def figures(self, records: int, size: int) -> dict[str, Any]:
        copy_s = self.copy_seconds
        return {
            "first_record_after_s": round(self.first - self.started, 2) if self.first else None,
            "copy_seconds": round(copy_s, 2) if copy_s else None,
            "copy_records_per_s": round(records / copy_s) if copy_s else None,
            "copy_mb_per_s": round(records * size / 1e6 / copy_s, 1) if copy_s else None,
            "poll_resolution_s": round(self.slowest_poll + POLL_S, 2),
            "within_one_poll": self.within_one_poll,
        }


class RecordWatch(TargetWatch):
    """TargetWatch for many small topics, by reading the records as they arrive: polling the end
    offsets of 1,000 topics takes seconds on a busy target, longer than such a copy lasts, so its
    first and last poll could fall in one round. A thread lists the target's topics (one metadata
    request, every POLL_S) and hands each new partition to two consumers, which read it from the
    beginning: one read_uncommitted notes the first record, one read_committed counts the records
    (commit markers are not records: ``expected`` is exact). Assigning the partitions before the
    topics exist instead left librdkafka seconds behind at 2,000 topics. ``slowest_poll``: the
    slowest metadata request or consume call."""

    def run(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        found: queue.SimpleQueue[list[tuple[str, int]]] = queue.SimpleQueue()
        threading.Thread(target=self._discover, args=(found,), daemon=True).start()
        group = f"bench-watch-{uuid.uuid4().hex[:8]}"
        first = clients.consumer(self.target, group, **{"fetch.wait.max.ms": 50, "isolation.level": "read_uncommitted"})
        counting = clients.consumer(self.target, group, **{"fetch.wait.max.ms": 50})
        try:
            while not self._stop_event.is_set():
                while not found.empty():
                    new = found.get()
                    for consumer in (counting, first) if self.first is None else (counting,):
                        consumer.incremental_assign([TopicPartition(t, p, OFFSET_BEGINNING) for t, p in new])
                began = time.monotonic()
                if self.first is None and [m for m in first.consume(1000, 0.05) if m.error() is None]:
                    self.first = time.monotonic()
                counted = sum(1 for m in counting.consume(10_000, POLL_S) if m.error() is None)
                now = time.monotonic()
                if counted and self.first is None:  # committed ones came first: written by now
                    self.first = now
                self.seen += counted
                self.slowest_poll = max(self.slowest_poll, now - began)
                if self.seen >= self.expected:
                    self.done = now
                    return
        finally:
            self._stop_event.set()
            first.close()
            counting.close()

    def _discover(self, found: queue.SimpleQueue[list[tuple[str, int]]]) -> None:
        """Puts the partitions of ``topics`` as they appear on the target into ``found``."""
        pending = {(t, p) for t, n in self.topics.items() for p in range(n)}
        while pending and not self._stop_event.is_set():
            began = time.monotonic()
            counts = partition_counts(self.admin)
            new = sorted((t, p) for t, p in pending if counts.get(t, 0) > p)
            if new:
                found.put(new)
                pending.difference_update(new)
            self.slowest_poll = max(self.slowest_poll, time.monotonic() - began)
            time.sleep(POLL_S)
