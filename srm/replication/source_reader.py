"""The source side of a copy slot: one read_committed consumer over the slot's partitions, the
way MirrorSourceTask holds one KafkaConsumer beside its producer.

The reader knows partitions only by (topic, partition) and offset: which are assigned, paused,
sought back after an aborted transaction, and where their logs start. What a record or an event
means for a partition's copy is :class:`srm.replication.copier.CopyLoop`'s business.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.replication.clientcache import ClientCache
from srm.replication.job import CopyJob

log = logging.getLogger(__name__)

Key = tuple[str, int]
CONSUME_BATCH = 10_000
CONSUMER_SETTINGS = {
    "enable.partition.eof": True,
    "auto.offset.reset": "error",  # never jump silently: a missing offset is reported as a loss
    "fetch.max.bytes": 8 * 1024 * 1024,
    "max.partition.fetch.bytes": 2 * 1024 * 1024,
    # Prefetched records waiting for the copy loop: 16 MiB is ~0.1 s of the brokers' limit here
    # at 1 KiB records; more only adds memory.
    "queued.max.messages.kbytes": 16 * 1024,
    "queued.min.messages": 20_000,
    # How long the broker holds a fetch that finds nothing new (Kafka's Java default). librdkafka
    # has no incremental fetch sessions (KIP-227): every fetch names every assigned partition, so a
    # copier holding 1,000 idle partitions spent 4 CPU-s a minute on fetches at 100 ms
    # (bench.scale's idle figure). Records end the wait as soon as they arrive; only a partition
    # assigned while a fetch is held waits for its end to be fetched.
    "fetch.wait.max.ms": 500,
    # A partition assigned again by the next task sometimes starts fetching only 1 s later
    # (debug=fetch: "start fetching" at t, the first Fetch at t + 1 s); these backoffs and sleeps
    # default to 1000/1000/500 ms, and lower values make that stall rarer (bench/REPORT.md).
    "socket.blocking.max.ms": 50,
    "fetch.queue.backoff.ms": 10,
    "fetch.error.backoff.ms": 10,
}
WAKE_TIMEOUT_S = 5.0


class SourceReader:
    """The slot's source consumer (cached per flow in the worker, so a continuous copier's next
    lease keeps its connections and prefetched records) and the source admin it asks for offsets."""

    def __init__(self, job: CopyJob, cache: ClientCache) -> None:
        self.job = job
        self.cache = cache
        self.digest = clients.settings_digest(job.source)  # its clients are built again when it changes
        self.consumer = cache.client(("source-consumer", job.flow.name), self._build_consumer, self.digest)
        self.consumer.assign([])

    def _build_consumer(self) -> Any:
        return clients.consumer(self.job.source, f"__srm.copy.{self.job.flow.target}", **CONSUMER_SETTINGS)

    def admin(self) -> Any:
        return self.cache.client(
            ("source-admin", self.job.flow.name), lambda: clients.admin_client(self.job.source), self.digest
        )

    def log_starts(self, keys: list[Key]) -> dict[Key, int]:
        """Each partition's earliest offset on the source (its log-start offset)."""
        return list_offsets(self.admin(), keys, "earliest")

    def assigned(self) -> set[Key]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def assign(self, positions: Iterable[tuple[str, int, int]]) -> None:
        """Start reading these (topic, partition, offset)s, beside what is assigned already."""
        from confluent_kafka import TopicPartition

        assignment = [TopicPartition(topic, partition, offset) for topic, partition, offset in positions]
        if assignment:
            leaders = self.leaders(sorted({tp.topic for tp in assignment}))
            self.consumer.incremental_assign(assignment)
            self.consumer.resume(assignment)  # a cached consumer may have paused these in an earlier task
            self._wake_fetchers(assignment, leaders)

    def unassign(self, keys: Iterable[Key]) -> None:
        from confluent_kafka import TopicPartition

        assigned = self.assigned()
        drop = [TopicPartition(topic, partition) for topic, partition in keys if (topic, partition) in assigned]
        if drop:
            self.consumer.incremental_unassign(drop)

    def pause(self, key: Key) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.pause([TopicPartition(*key)])

    def seek(self, key: Key, offset: int, *, resume: bool = False) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.seek(TopicPartition(key[0], key[1], offset))
        if resume:
            self.consumer.resume([TopicPartition(*key)])

    def consume(self, wait_s: float) -> list[Any]:
        """What the consumer holds; waits up to ``wait_s`` for a first record if it holds none."""
        messages = self.consumer.consume(CONSUME_BATCH, 0)
        if not messages and wait_s > 0:
            first = self.consumer.poll(wait_s)
            if first is not None:
                messages = [first, *self.consumer.consume(CONSUME_BATCH, 0)]
        return messages  # type: ignore[no-any-return]

    def close(self) -> None:
        """Give the partitions back (the consumer stays cached for the slot's next task)."""
        self.consumer.unassign()

    def leaders(self, topics: list[str]) -> dict[Key, int]:
        """Metadata of every topic into the consumer's cache, before it is assigned partitions of
        ``topics``; the broker id of each of their partitions' leaders.

        librdkafka fetches a partition of a topic it has no metadata of only after a metadata
        refresh of its own has found the leader: measured here, the first records of 50 topics new
        to a consumer came 0.9 s after their assignment, with the metadata asked for first 0.06 s
        (a copier's start, a lease's new topics). One request for all topics: a request per topic
        would cost a round trip each at a copier's start over thousands of topics."""
        from confluent_kafka import KafkaException

        try:
            metadata = self.consumer.list_topics(timeout=WAKE_TIMEOUT_S)
        except KafkaException as exc:  # only a shortcut: the consumer asks for what it misses anyway
            log.debug("metadata of %s for its consumer failed: %s", self.job.source.alias, exc)
            return {}
        leaders = {}
        for topic in topics:
            info = metadata.topics.get(topic)
            if info is None or info.error is not None:
                continue
            leaders.update({(topic, p): m.leader for p, m in info.partitions.items() if m.leader >= 0})
        return leaders

    def _wake_fetchers(self, assignment: list[Any], leaders: dict[Key, int]) -> None:
        """librdkafka starts fetching a newly assigned partition when the leader's broker thread
        next wakes up, which on an idle connection is up to 1 s later: measured here, 1 in 2
        continuous-mode batches waited 1.0 s for it. Any request to the leader wakes that thread
        now: one cheap ListOffsets per distinct leader (``leaders``: from :meth:`leaders`)
        (bench/REPORT.md, "Latency")."""
        from confluent_kafka import KafkaException

        by_leader: dict[int, Any] = {}
        for tp in assignment:
            if (tp.topic, tp.partition) in leaders:
                by_leader.setdefault(leaders[(tp.topic, tp.partition)], tp)
        try:
            for tp in by_leader.values():
                self.consumer.get_watermark_offsets(tp, timeout=WAKE_TIMEOUT_S, cached=False)
        except KafkaException as exc:  # only a shortcut: fetching starts on its own anyway
            log.debug("waking the fetchers of %s failed: %s", self.job.source.alias, exc)
