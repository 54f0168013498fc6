"""The source side of a copy slot: one read_committed consumer over the slot's partitions, the
way MirrorSourceTask holds one KafkaConsumer beside its producer.

The reader knows partitions only by (topic, partition) and offset: which are assigned, paused,
sought back after an aborted transaction, and where their logs start. What a record or an event
means for a partition's copy is :class:`srm.replication.copier.CopyLoop`'s business.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from srm.errors import InvariantError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.replication.clientcache import ClientCache
from srm.replication.job import CopyJob

log = logging.getLogger(__name__)

Key = tuple[str, int]
CONSUME_BATCH = 10_000
FETCH_WAIT_MS = 500  # Kafka's Java default, see CONSUMER_SETTINGS
CONSUMER_SETTINGS = {
    "enable.partition.eof": True,
    "auto.offset.reset": "error",  # never jump silently: a missing offset is reported as a loss
    "fetch.max.bytes": 8 * 1024 * 1024,
    "max.partition.fetch.bytes": 2 * 1024 * 1024,
    # Prefetched records waiting for the copy loop: 16 MiB is ~0.1 s of the brokers' limit here
    # at 1 KiB records; more only adds memory.
    "queued.max.messages.kbytes": 16 * 1024,
    "queued.min.messages": 20_000,
    # How long the broker holds a fetch that finds nothing new (Kafka's Java default); a quiet
    # continuous copier's consumer holds it longer (QUIET_FETCH_WAIT_MS).
    "fetch.wait.max.ms": FETCH_WAIT_MS,
    # A partition assigned again by the next task sometimes starts fetching only 1 s later
    # (debug=fetch: "start fetching" at t, the first Fetch at t + 1 s); these backoffs and sleeps
    # default to 1000/1000/500 ms, and lower values make that stall rarer (bench/REPORT.md).
    "socket.blocking.max.ms": 50,
    "fetch.queue.backoff.ms": 10,
    "fetch.error.backoff.ms": 10,
}
# A continuous copier whose consumer has handed over no record (events do not count) for
# QUIET_AFTER_S reads on a consumer whose fetch the broker holds QUIET_FETCH_WAIT_MS when it finds
# nothing new. librdkafka has no incremental fetch sessions (KIP-227): every fetch names every
# assigned partition and its answer carries them all, so idle partitions cost a fetch's worth of
# CPU per wait (1,000 idle partitions, one consumer: 2.55 CPU-s a minute at a 100 ms hold, 0.72 at
# 500, 0.24 at 5,000, which is the copy loop's own polling). Records end the wait as soon as they
# arrive (fetch.min.bytes 1; a transaction's commit on the source too), so the hold delays no
# record; it delays a change of what is fetched (a partition assigned, sought or resumed), which
# waits for the held fetch to return. So every change moves the copier onto a fresh consumer with
# Kafka's default hold (CONSUMER_SETTINGS), and so does the first record the quiet one hands over.
QUIET_AFTER_S = 30.0
QUIET_FETCH_WAIT_MS = 5000
# A continuous copier with a transaction.linger.ms commits no sooner than that after its previous
# commit, so its records need not be fetched the moment they arrive. With fetch.min.bytes 1 every
# fetch returns with whatever has come, and under a steady load the copier fetched on nearly every
# arrival, each fetch naming all its partitions (bench.soak's shape, 5,000 records/s over 64
# partitions, two copiers: 1,588 fetches a second on the source, the copiers' Python workers at
# half a core). Lingering, the broker holds a fetch until a MiB has come or a tenth of the linger
# has passed (157 fetches a second there, the workers at a fifth of a core). The price: a record
# waits up to that tenth at the broker, and a trickle over many partitions pays a fetch every
# tenth of the linger rather than one per arrival (until the quiet consumer takes over).
LINGER_FETCH_MIN_BYTES = 1024 * 1024
LINGER_FETCH_WAIT_SHARE = 10
METADATA_TIMEOUT_S = 5.0
# Topics newly assigned to a copier's consumer asked for in one metadata request each, up to this
# many; more in one request for all topics (one round trip, however many topics).
METADATA_PER_TOPIC = 10


def consumer_settings(linger_ms: int, *, quiet: bool = False) -> dict[str, Any]:
    """CONSUMER_SETTINGS for a copier whose transactions stay open ``linger_ms`` at least
    (transaction.linger.ms; 0: none). ``quiet``: the longer hold, and any record ends it."""
    if quiet:
        return {**CONSUMER_SETTINGS, "fetch.wait.max.ms": QUIET_FETCH_WAIT_MS}
    if linger_ms <= 0:
        return dict(CONSUMER_SETTINGS)
    hold = min(FETCH_WAIT_MS, max(1, linger_ms // LINGER_FETCH_WAIT_SHARE))
    return {**CONSUMER_SETTINGS, "fetch.min.bytes": LINGER_FETCH_MIN_BYTES, "fetch.wait.max.ms": hold}


class SourceReader:
    """The slot's source consumer (cached per flow in the worker, so an available-now copier's next
    task keeps its connections and prefetched records) and the source admin it asks for offsets."""

    def __init__(
        self, job: CopyJob, cache: ClientCache, positions: Callable[[], Mapping[Key, int]] | None = None
    ) -> None:
        """``positions``: the offset each partition's copy reads next (CopyLoop's), for moving a
        continuous copier onto another consumer between two steps."""
        self.job = job
        self.cache = cache
        self.positions = positions
        self.continuous = job.lease is not None
        self.quiet = False  # reading on a consumer with the longer hold
        self._quiet_at = time.monotonic() + QUIET_AFTER_S  # from then on, if no record came
        self._woken = False  # a record came while quiet
        self.digest = clients.settings_digest(job.source)  # its clients are built again when it changes
        self.key = ("source-consumer", job.flow.name, "continuous" if self.continuous else "available-now")
        self.consumer_digest = job.lingering_digest(self.digest)  # consumer_settings follow the linger
        self.consumer = cache.client(self.key, self._build_consumer, self.consumer_digest)
        self.consumer.assign([])
        self.paused: set[Key] = set()  # assigned, and paused by pause() until sought with resume or assigned again
        self._ahead: tuple[threading.Thread, list[tuple[Any, dict[str, int]]]] | None = None  # learn_ahead()

    def _build_consumer(self, *, quiet: bool = False) -> Any:
        settings = consumer_settings(self.job.linger_ms, quiet=quiet)
        built = clients.consumer(self.job.source, f"__srm.copy.{self.job.flow.target}", **settings)
        return clients.settled(built)

    def admin(self) -> Any:
        return self.cache.client(
            ("source-admin", self.job.flow.name),
            lambda: clients.settled(clients.admin_client(self.job.source)),
            self.digest,
        )

    def log_starts(self, keys: list[Key]) -> dict[Key, int]:
        """Each partition's earliest offset on the source (its log-start offset)."""
        return list_offsets(self.admin(), keys, "earliest")

    def assigned(self) -> set[Key]:
        return {(tp.topic, tp.partition) for tp in self.consumer.assignment()}

    def assign(self, positions: Iterable[tuple[str, int, int]]) -> None:
        """Start reading these (topic, partition, offset)s, beside what is assigned already.

        A continuous copier reads them and those it reads already, from the offsets its copy reads
        next (``positions``), on a fresh consumer (learn_ahead()'s, when
        it built one), its old one closed: the broker may hold the old one's fetch (up to
        ``fetch.wait.max.ms``), and librdkafka names a newly assigned partition only in the
        fetch after it. Measured (1,000 idle partitions, a new topic's record waiting): assigned
        to the same consumer, the record came 6.19 s later at a 5 s hold and 0.83 s at 0.5 s; on
        a fresh consumer mostly 0.1-0.2 s, closing the old one 7-25 ms. A fresh consumer's first
        fetches name the partitions it has taken on so far (debug=fetch: 15, then 152 of 1,001),
        so a partition can still wait for one held fetch (2 of 10 times here)."""
        from confluent_kafka import TopicPartition

        assignment = [TopicPartition(topic, partition, offset) for topic, partition, offset in positions]
        if not assignment:
            return
        if self.continuous:
            self._afresh([*assignment, *self._carried()])
            return
        self.learn(unknown_topics(assignment, {}))
        self.consumer.incremental_assign(assignment)
        self.consumer.resume(assignment)  # a cached consumer may have paused these in an earlier task
        self.paused -= {(tp.topic, tp.partition) for tp in assignment}

    def _afresh(self, assignment: list[Any], *, quiet: bool = False) -> None:
        """``assignment`` on a fresh consumer in place of the old one, which is closed; partitions
        paused stay paused. ``quiet``: one with the longer hold."""
        from confluent_kafka import TopicPartition

        spare, known = (None, {}) if quiet else self._spare()
        self.cache.drop_client(self.key)
        build = partial(self._build_consumer, quiet=quiet) if spare is None else lambda: spare
        self.consumer = self.cache.client(self.key, build, self.consumer_digest)
        self.quiet, self._woken = quiet, False
        self._quiet_at = time.monotonic() + QUIET_AFTER_S
        self.learn(unknown_topics(assignment, known))
        self.consumer.assign(assignment)
        self.paused &= {(tp.topic, tp.partition) for tp in assignment}
        if self.paused:
            self.consumer.pause([TopicPartition(*key) for key in self.paused])

    def unassign(self, keys: Iterable[Key]) -> None:
        from confluent_kafka import TopicPartition

        assigned = self.assigned()
        drop = [TopicPartition(topic, partition) for topic, partition in keys if (topic, partition) in assigned]
        if drop:
            self.consumer.incremental_unassign(drop)
            self.paused -= {(tp.topic, tp.partition) for tp in drop}

    def pause(self, key: Key) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.pause([TopicPartition(*key)])
        self.paused.add(key)

    def seek(self, key: Key, offset: int, *, resume: bool = False) -> None:
        from confluent_kafka import TopicPartition

        self.consumer.seek(TopicPartition(key[0], key[1], offset))
        if resume:
            self.consumer.resume([TopicPartition(*key)])
            self.paused.discard(key)

    def consume(self, wait_s: float) -> list[Any]:
        """What the consumer holds; waits up to ``wait_s`` for a first record if it holds none."""
        if self.continuous:
            self._pick_consumer()
        messages = self.consumer.consume(CONSUME_BATCH, 0)
        if not messages and wait_s > 0:
            first = self.consumer.poll(wait_s)
            if first is not None:
                messages = [first, *self.consumer.consume(CONSUME_BATCH, 0)]
        if messages and any(m.error() is None for m in messages):  # records, not only events
            if self.quiet:
                self._woken = True
            else:
                self._quiet_at = time.monotonic() + QUIET_AFTER_S
        return messages  # type: ignore[no-any-return]

    def _pick_consumer(self) -> None:
        """Between two steps (what was handed over is handled): onto a quiet consumer after
        QUIET_AFTER_S without a record, back onto one with the usual hold at the first record."""
        if self._woken if self.quiet else time.monotonic() >= self._quiet_at:
            self._afresh(self._carried(), quiet=not self.quiet)

    def _carried(self) -> list[Any]:
        """The partitions assigned now, each at the offset its copy reads next (``positions``)."""
        from confluent_kafka import TopicPartition

        assigned = self.assigned()
        at = self.positions() if self.positions is not None else {}
        missing = sorted(assigned - set(at))
        if missing:  # each partition is assigned for a copy of it (CopyLoop.add, .remove)
            raise InvariantError(f"partitions {missing} are read without a copy of them")
        return [TopicPartition(t, p, at[t, p]) for t, p in assigned]

    def close(self) -> None:
        """Give the partitions back (the consumer stays cached for the slot's next task); a
        consumer learn_ahead() built and assign() did not use is closed."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead[0].join(METADATA_TIMEOUT_S)
            for spare, _ in ahead[1]:
                spare.close()
        self.consumer.unassign()
        self.paused.clear()

    def learn_ahead(self) -> None:
        """A fresh consumer holding the metadata of every topic, built in a thread of its own while
        the copier goes on: a lease ended early for a change of plan, and the next one, a second
        or less away, may bring new topics, which :meth:`assign` then reads on it at once."""
        if self._ahead is not None or not self.continuous:
            return
        built: list[tuple[Any, dict[str, int]]] = []

        def build() -> None:
            from confluent_kafka import KafkaException

            try:
                consumer = self._build_consumer()
            except Exception as exc:  # only a shortcut: assign() builds one itself
                log.debug("a spare consumer of %s failed: %s", self.job.source.alias, exc)
                return
            learned: dict[str, int] = {}
            try:
                metadata = clients.list_metadata(consumer, timeout_s=METADATA_TIMEOUT_S)
                learned = {name: len(t.partitions) for name, t in metadata.topics.items() if t.error is None}
            except KafkaException as exc:  # assign() asks for what is missing
                log.debug("metadata of %s for a spare consumer failed: %s", self.job.source.alias, exc)
            built.append((consumer, learned))

        thread = threading.Thread(target=build, name="srm-learn-ahead", daemon=True)
        thread.start()
        self._ahead = (thread, built)

    def _spare(self) -> tuple[Any | None, dict[str, int]]:
        """The consumer the last learn_ahead() built and the topics (and partitions) it learned,
        once; waited for if still building (up to METADATA_TIMEOUT_S, then left to close())."""
        ahead = self._ahead
        if ahead is None:
            return None, {}
        thread, built = ahead
        thread.join(METADATA_TIMEOUT_S)
        if thread.is_alive():
            return None, {}
        self._ahead = None
        return built[0] if built else (None, {})

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
                clients.list_metadata(self.consumer, timeout_s=METADATA_TIMEOUT_S)
            else:
                for topic in topics:
                    self.consumer.list_topics(topic, timeout=METADATA_TIMEOUT_S)
        except KafkaException as exc:  # only a shortcut: the consumer asks for what it misses anyway
            log.debug("metadata of %s for its consumer failed: %s", self.job.source.alias, exc)


def unknown_topics(assignment: list[Any], known: dict[str, int]) -> list[str]:
    """The topics of ``assignment`` whose partitions ``known`` (topic -> partition count) lacks."""
    needed: dict[str, int] = {}
    for tp in assignment:
        needed[tp.topic] = max(needed.get(tp.topic, 0), tp.partition + 1)
    return sorted(topic for topic, count in needed.items() if known.get(topic, 0) < count)
