"""The source side of a copy slot: one read_committed consumer over the slot's partitions, the
way MirrorSourceTask holds one KafkaConsumer beside its producer.

The reader knows partitions only by (topic, partition) and offset: which are assigned, paused,
sought back after an aborted transaction, and where their logs start. What a record or an event
means for a partition's copy is :class:`srm.replication.copier.CopyLoop`'s business.
"""

from __future__ import annotations

import logging
import threading
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
METADATA_TIMEOUT_S = 5.0
# Topics newly assigned to a copier's consumer asked for in one metadata request each, up to this
# many; more in one request for all topics (one round trip, however many topics).
METADATA_PER_TOPIC = 10


class SourceReader:
    """The slot's source consumer (cached per flow in the worker, so a continuous copier's next
    lease keeps its connections and prefetched records) and the source admin it asks for offsets."""

    def __init__(self, job: CopyJob, cache: ClientCache) -> None:
        self.job = job
        self.cache = cache
        self.digest = clients.settings_digest(job.source)  # its clients are built again when it changes
        self.consumer = cache.client(("source-consumer", job.flow.name), self._build_consumer, self.digest)
        self.consumer.assign([])
        self._ahead: tuple[threading.Thread, dict[str, int]] | None = None  # learn_ahead(): thread, what it learned

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
            needed: dict[str, int] = {}
            for tp in assignment:
                needed[tp.topic] = max(needed.get(tp.topic, 0), tp.partition + 1)
            known = self._learned_ahead()
            self.learn(sorted(t for t, n in needed.items() if known.get(t, 0) < n))
            self.consumer.incremental_assign(assignment)
            self.consumer.resume(assignment)  # a cached consumer may have paused these in an earlier task

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
        """Give the partitions back (the consumer stays cached for the slot's next task); a
        learn_ahead() still asking is waited for, so the cache never closes the consumer under it."""
        if self._ahead is not None:
            self._ahead[0].join(METADATA_TIMEOUT_S)
            self._ahead = None
        self.consumer.unassign()

    def learn_ahead(self) -> None:
        """The metadata of every topic into the consumer's cache, in a thread of its own, while the
        copier goes on: a lease ended early for a change of plan, and the next one, a second or
        less away, may bring new topics, whose metadata :meth:`assign` then need not wait for
        (the request waits behind the fetch the broker holds, up to ``fetch.wait.max.ms``)."""
        from confluent_kafka import KafkaException

        if self._ahead is not None and self._ahead[0].is_alive():
            return
        learned: dict[str, int] = {}

        def ask() -> None:
            try:
                metadata = self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
            except KafkaException as exc:  # only a shortcut: assign() asks for what is missing
                log.debug("metadata of %s for its consumer failed: %s", self.job.source.alias, exc)
                return
            learned.update({name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None})

        thread = threading.Thread(target=ask, name="srm-learn-ahead", daemon=True)
        thread.start()
        self._ahead = (thread, learned)

    def _learned_ahead(self) -> dict[str, int]:
        """The topics (and partitions) the last learn_ahead() put into the cache, once; it is
        waited for if still asking (its request is ahead of any asked now)."""
        ahead = self._ahead
        if ahead is None:
            return {}
        thread, learned = ahead
        thread.join(METADATA_TIMEOUT_S)
        if thread.is_alive():  # still asking: close() waits for it again
            return {}
        self._ahead = None
        return learned

    def learn(self, topics: list[str]) -> None:
        """Metadata of ``topics`` into the consumer's cache, before it is assigned their partitions.

        librdkafka fetches a partition whose leader it does not know yet only after a metadata
        refresh of its own. Measured here: at a copier's start over 50 topics its first records
        came 0.9-1.4 s after the assignment without this, 0.06-0.1 s with it; a lease's new topic
        in a copier of 1,000 idle partitions, 1.18-1.29 s without, 0.80-0.94 s with it (the request
        then waits behind the fetch the broker holds for the others, ``fetch.wait.max.ms``, and so
        does the new partition's first fetch). Up to :data:`METADATA_PER_TOPIC` topics are asked
        for one by one, more in one request for all topics.

        The ListOffsets once sent to each leader after an assignment, to wake its broker thread
        (asleep up to 1 s in librdkafka 1.x), also waited behind that held fetch and stopped the
        copy loop for up to 0.5 s, the first record no earlier (0.51-0.53 s either way): gone."""
        from confluent_kafka import KafkaException

        if not topics:
            return
        try:
            if len(topics) > METADATA_PER_TOPIC:
                self.consumer.list_topics(timeout=METADATA_TIMEOUT_S)
            else:
                for topic in topics:
                    self.consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:  # only a shortcut: the consumer asks for what it misses anyway
            log.debug("metadata of %s for its consumer failed: %s", self.job.source.alias, exc)
