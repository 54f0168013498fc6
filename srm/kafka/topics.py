"""Topic administration on one cluster: creation, configs, offsets, ids, record counts.

Every call resolves its futures, retries retriable errors (see :mod:`srm.kafka.retry`) and raises
SrmError naming the topic otherwise.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from srm.errors import ClusterUnreachableError, SrmError
from srm.kafka.retry import acl_hint, is_retriable, needs, retrying
from srm.mm2.topic_configs import ConfigValue

ADMIN_TIMEOUT_S = 30.0  # a metadata request on a healthy cluster takes milliseconds; allow for elections
BATCH = 500  # topics to one CreateTopics or DescribeConfigs request
SERVED_WAIT_S = 120.0  # new partitions until their leaders hold them: 10,000 on one broker take ~30 s
SERVED_POLL_S = 0.25
# A transaction of a live copier lasts its transaction.interval.ms (100 ms by default) and its commit;
# one still open after this holds a read of an internal topic because its producer is gone.
HELD_S = 10.0
# What a leader says of a partition it has not created yet (or a client whose metadata lacks it).
NOT_SERVED_YET = ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_PARTITION", "_UNKNOWN_TOPIC", "_NOENT")


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int
    records: int  # sum over partitions of (high watermark - low watermark): what a reader can still read

    def __str__(self) -> str:
        return f"{self.name} ({self.partitions} partitions, {self.records} records)"


def _in_batches(names: list[str], attempt: Callable[[list[str]], None]) -> None:
    """``attempt(batch)`` for every BATCH names. A batch that fails for good (not for a cluster that
    does not answer) is attempted again one name at a time, so that the failure names its topic."""
    for batch in (names[i : i + BATCH] for i in range(0, len(names), BATCH)):
        if len(batch) > 1:
            try:
                attempt(batch)
                continue
            except ClusterUnreachableError:
                raise
            except SrmError:
                pass
        for name in batch:
            attempt([name])


def _subject(names: list[str]) -> str:
    """What a batched call is about, in its error: the topic, when it is one."""
    return f"topic {names[0]!r}" if len(names) == 1 else f"{len(names)} topics"


def _needed(admin: Any, operation: str, names: list[str]) -> str | None:
    """The ACL a call on one topic needs (a batch that fails for good is retried topic by topic)."""
    return needs(admin, operation, f"TOPIC {names[0]!r}") if len(names) == 1 else None


def _resolve(futures: dict[Any, Any]) -> dict[Any, Any]:
    return {key: future.result(timeout=ADMIN_TIMEOUT_S) for key, future in futures.items()}


def _admin(request: Callable[[], dict[Any, Any]], what: str, admin: Any, needed: str | None) -> dict[Any, Any]:
    return retrying(
        lambda: _resolve(request()),
        _on(admin, what),
        needed=needed,
        refresh=lambda: admin.list_topics(timeout=ADMIN_TIMEOUT_S),
        cluster=getattr(admin, "srm_alias", None),
    )


def _on(admin: Any, what: str) -> str:
    """``what`` followed by the cluster the admin client talks to, when known."""
    cluster = getattr(admin, "srm_cluster", None)
    return f"{what} on {cluster}" if cluster else what


@dataclass(frozen=True)
class NewTopicSpec:
    name: str
    partitions: int
    replication_factor: int = 1
    config: Mapping[str, str] = field(default_factory=dict)


def ensure_topic(
    admin: Any, name: str, partitions: int, replication_factor: int = 1, config: dict[str, str] | None = None
) -> bool:
    """Create ``name`` unless it exists; True if it was created. Other failures name the topic."""
    return bool(ensure_topics(admin, [NewTopicSpec(name, partitions, replication_factor, config or {})]))


def ensure_topics(admin: Any, topics: Sequence[NewTopicSpec]) -> set[str]:
    """Create each of ``topics`` that does not exist, BATCH topics to a CreateTopics request (the
    controller creates them together: 1,000 topics in one request instead of 1,000 round trips);
    the names of those created. A failure names its topic: a request that fails for good is sent
    again one topic at a time up to the topic that fails."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    created: set[str] = set()
    pending = {t.name: t for t in topics}

    def create(names: list[str]) -> None:
        requests = [
            NewTopic(n, num_partitions=t.partitions, replication_factor=t.replication_factor, config=dict(t.config))
            for n in names
            if (t := pending.get(n)) is not None
        ]
        if not requests:  # created by an earlier attempt of its batch
            return
        failure: KafkaException | None = None
        for name, future in admin.create_topics(requests, operation_timeout=ADMIN_TIMEOUT_S).items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    failure = failure or exc
                    continue
            else:
                created.add(name)
            del pending[name]  # created, or there already: not asked for again
        if failure is not None:
            raise failure

    def attempt(names: list[str]) -> None:
        retrying(
            lambda: create(names),
            _on(admin, f"cannot create {_subject(names)}"),
            needed=_needed(admin, "CREATE", names),
            cluster=getattr(admin, "srm_alias", None),
        )

    _in_batches(list(pending), attempt)
    return created


def cluster_metadata(admin: Any) -> Any:
    """The cluster's metadata (``.topics``: name -> partitions; ``.brokers``), in one request."""
    return retrying(
        lambda: admin.list_topics(timeout=ADMIN_TIMEOUT_S),
        _on(admin, "cannot list topics"),
        cluster=getattr(admin, "srm_alias", None),
    )


def partition_counts(admin: Any, include_internal: bool = False) -> dict[str, int]:
    """Topic name -> partition count."""
    metadata = cluster_metadata(admin)
    return {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if include_internal or not name.startswith("__")
    }


def describe(admin: Any, consumer: Any, include_internal: bool = False) -> list[TopicInfo]:
    """Every topic with its partition and record counts, sorted by name.

    Counts records by reading (``consumer`` needs ``enable.partition.eof``): offsets would also
    count transaction markers. Meant for small topics (the demo, status pages of test clusters).
    """
    infos = []
    for name, count in sorted(partition_counts(admin, include_internal).items()):
        infos.append(TopicInfo(name, count, sum(record_counts(consumer, name, count).values())))
    return infos


def describe_config_values(admin: Any, topic: str) -> list[ConfigValue]:
    """Every config of ``topic`` with where its value comes from."""
    return describe_configs_of(admin, [topic])[topic]


def describe_configs_of(admin: Any, topics: Sequence[str]) -> dict[str, list[ConfigValue]]:
    """Every config of each of ``topics`` with where its value comes from, BATCH topics to a request."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType  # type: ignore[attr-defined]

    found: dict[str, list[ConfigValue]] = {}

    def attempt(names: list[str]) -> None:
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
        entries = _admin(
            lambda: admin.describe_configs(resources),
            f"cannot read the configs of {_subject(names)}",
            admin,
            _needed(admin, "DESCRIBE_CONFIGS", names),
        )
        for resource, values in entries.items():
            found[resource.name] = [
                ConfigValue(e.name, e.value, ConfigSource(e.source).name, bool(e.is_read_only), bool(e.is_sensitive))
                for e in values.values()
            ]

    _in_batches(list(dict.fromkeys(topics)), attempt)
    return found


def describe_topic_configs(admin: Any, topic: str) -> dict[str, str | None]:
    return {c.name: c.value for c in describe_config_values(admin, topic)}


def topic_replication_factors(admin: Any, topics: list[str]) -> dict[str, int]:
    metadata = cluster_metadata(admin).topics
    return {t: len(metadata[t].partitions[0].replicas) for t in topics if t in metadata and metadata[t].partitions}


def broker_count(admin: Any) -> int:
    return len(cluster_metadata(admin).brokers)


def _describe(admin: Any, topics: list[str]) -> dict[str, Any]:
    from confluent_kafka import TopicCollection

    if not topics:
        return {}
    return _admin(
        lambda: admin.describe_topics(TopicCollection(topics), request_timeout=ADMIN_TIMEOUT_S),
        "cannot describe topics",
        admin,
        needs(admin, "DESCRIBE", "TOPIC " + ", ".join(map(repr, topics))),
    )


def topic_ids(admin: Any, topics: list[str]) -> dict[str, str]:
    """Topic name -> Kafka topic id (changes when a topic is deleted and created again)."""
    return {name: str(info.topic_id) for name, info in _describe(admin, topics).items()}


def partition_leaders(admin: Any, topics: list[str]) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the broker id of its leader (partitions without one are left out)."""
    return {
        (name, p.id): p.leader.id
        for name, info in _describe(admin, topics).items()
        for p in info.partitions
        if p.leader is not None and p.leader.id >= 0
    }


def list_offsets(
    admin: Any, partitions: list[tuple[str, int]], spec: str, *, read_committed: bool = True
) -> dict[tuple[str, int], int]:
    """``latest`` (read_committed: the last stable offset; otherwise the high watermark) or
    ``earliest`` offset of each partition."""
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    offset_spec = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    return _offsets(admin, {tp: offset_spec for tp in partitions}, read_committed=read_committed)


def offsets_for_time(admin: Any, partitions: list[tuple[str, int]], timestamp_ms: int) -> dict[tuple[str, int], int]:
    """First offset at or after ``timestamp_ms`` per partition (the end offset when none is)."""
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    found = _offsets(admin, {tp: OffsetSpec.for_timestamp(timestamp_ms) for tp in partitions})
    missing = [tp for tp, offset in found.items() if offset < 0]
    return {**found, **list_offsets(admin, missing, "latest")}


def _offsets(
    admin: Any, specs: dict[tuple[str, int], Any], *, read_committed: bool = True
) -> dict[tuple[str, int], int]:
    from confluent_kafka import IsolationLevel, TopicPartition

    if not specs:
        return {}
    request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
    results = _admin(
        lambda: admin.list_offsets(
            request,
            isolation_level=IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED,
            request_timeout=ADMIN_TIMEOUT_S,
        ),
        "cannot list offsets of " + ", ".join(sorted({t for t, _ in specs})),
        admin,
        needs(admin, "DESCRIBE", "TOPIC " + ", ".join(repr(t) for t in sorted({t for t, _ in specs}))),
    )
    return {(tp.topic, tp.partition): info.offset for tp, info in results.items()}


def await_served(admin: Any, partitions: Sequence[tuple[str, int]], timeout_s: float = SERVED_WAIT_S) -> None:
    """Until the leader of each of ``partitions`` (just created) answers a ListOffsets for it.

    A broker publishes new partitions in its metadata before it has created their logs (KRaft
    applies the metadata image first, then the replica manager's delta), and a produce in between
    is refused with UNKNOWN_TOPIC_OR_PART, which librdkafka does not retry. With thousands of
    partitions created at once the gap lasts seconds; the leader answering for a partition closes
    it. ``timeout_s`` bounds the wait, then ClusterUnreachableError names the partitions still not
    served (a flow's lease waits again, up to its errors.retry.timeout); another error raises SrmError."""
    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    pending = set(partitions)
    deadline = time.monotonic() + timeout_s
    last: Any = None
    while pending:
        request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in pending}  # type: ignore[no-untyped-call]
        try:
            futures = admin.list_offsets(request, request_timeout=ADMIN_TIMEOUT_S)
        except KafkaException as exc:  # the client's metadata has not got a topic yet
            futures, last = {}, exc.args[0]
        for tp, future in futures.items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                error = exc.args[0]
                if error.name() not in NOT_SERVED_YET and not is_retriable(error):
                    where = f"partition {tp.partition} of topic {tp.topic!r}"
                    needed = needs(admin, "DESCRIBE", f"TOPIC {tp.topic!r}")
                    detail = acl_hint(error, needed)
                    raise SrmError(_on(admin, f"cannot list the offsets of new {where}") + f": {detail}") from None
                last = error
                continue
            pending.discard((tp.topic, tp.partition))
        if not pending:
            return
        if time.monotonic() > deadline:
            shown = ", ".join(f"{t}[{p}]" for t, p in sorted(pending)[:5]) + (", ..." if len(pending) > 5 else "")
            detail = last.str() if hasattr(last, "str") else str(last)
            raise ClusterUnreachableError(
                _on(admin, f"{len(pending)} new partition(s) not served by their leaders")
                + f" after {timeout_s:.0f} s ({shown}: {detail}); the brokers may still be creating them",
                cluster=getattr(admin, "srm_alias", None),
            )
        with contextlib.suppress(KafkaException):  # the next attempt says what is wrong
            admin.list_topics(timeout=ADMIN_TIMEOUT_S)
        time.sleep(SERVED_POLL_S)


def create_partitions(admin: Any, topic: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]

    _admin(
        lambda: admin.create_partitions([NewPartitions(topic, total)], operation_timeout=ADMIN_TIMEOUT_S),
        f"cannot grow topic {topic!r} to {total} partitions",
        admin,
        needs(admin, "ALTER", f"TOPIC {topic!r}"),
    )


def record_counts(consumer: Any, topic: str, partitions: int, timeout_s: float = 60.0) -> dict[int, int]:
    """Records per partition that ``consumer`` sees when reading ``topic`` to its end.

    Unlike watermarks this skips transaction markers and, with read_committed, aborted records.
    ``consumer`` must have ``enable.partition.eof`` set.
    """
    import time

    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    counts = dict.fromkeys(range(partitions), 0)
    waiting = set(counts)
    assign_partitions(consumer, [TopicPartition(topic, p, OFFSET_BEGINNING) for p in waiting])
    deadline = time.monotonic() + timeout_s
    try:
        while waiting:
            if time.monotonic() > deadline:
                raise SrmError(f"reading {topic} to its end took over {timeout_s:.0f} s")
            for message in consumer.consume(10_000, 0.05):
                error = message.error()
                if error is None:
                    counts[message.partition()] += 1
                elif error.name() == "_PARTITION_EOF":
                    waiting.discard(message.partition())
    finally:
        consumer.unassign()
    return counts


def read_to_end(
    consumer: Any,
    topic: str,
    partition: int | Sequence[int] = 0,
    timeout_s: float = 120.0,
    *,
    keep_assigned: bool = False,
    start: int | None = None,
    until: Mapping[int, int] | None = None,
    on_held: Callable[[], None] | None = None,
    held_s: float = HELD_S,
) -> Generator[Any, None, None]:
    """Every record of one partition, or of several read at once, from its start (or offset
    ``start``) up to its current end (``enable.partition.eof`` set on ``consumer``): how the
    compacted internal topics are read. Records of one partition come in order. ``keep_assigned``
    leaves the consumer positioned at the end, to read what comes later. Gives up when nothing
    comes for ``timeout_s``.

    A read_committed consumer's end is the last stable offset: a transaction still open holds it
    back, and records committed after that transaction began are not read. ``until``: offsets per
    partition the end must reach first; a partition's high watermark (:func:`list_offsets` with
    ``read_committed=False``) taken before the read makes it go on until every transaction open then has ended, so every
    record committed before the read began is read. ``on_held`` is called once when the read has
    stood at a partition's end short of ``until`` for ``held_s``: a transaction stays open that
    long only when its producer is gone (or its cluster in trouble), and the caller may fence it."""
    import time

    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    partitions = [partition] if isinstance(partition, int) else list(partition)
    where = f"{topic}[{partitions[0]}]" if len(partitions) == 1 else f"{topic} ({len(partitions)} partitions)"
    pending = set(partitions)
    ends = until or {}
    first = OFFSET_BEGINNING if start is None else start
    assign_partitions(consumer, [TopicPartition(topic, p, first) for p in partitions])
    deadline = time.monotonic() + timeout_s
    held = _Held(on_held, held_s)
    try:
        while True:
            if time.monotonic() > deadline:
                waiting = f" (a transaction open since before offset {max(ends.values())})" if ends else ""
                raise SrmError(f"reading {where} to its end{waiting}: nothing for {timeout_s:.0f} s")
            held.check()
            messages = consumer.consume(10_000, 0.05)
            if messages:
                deadline = time.monotonic() + timeout_s
                held.since = None
            for message in messages:
                error = message.error()
                if error is None:
                    yield message
                elif error.name() == "_PARTITION_EOF" and message.offset() >= ends.get(message.partition(), 0):
                    pending.discard(message.partition())
                    if not pending:
                        return
                elif error.name() == "_PARTITION_EOF":
                    held.since = time.monotonic()
                else:
                    _check_read(error, where)
    finally:
        if not keep_assigned:
            consumer.unassign()


class _Held:
    """Calls ``on_held`` once when a read has stood at a partition's end (its last stable offset),
    short of where it must reach, for ``held_s``."""

    def __init__(self, on_held: Callable[[], None] | None, held_s: float) -> None:
        self.on_held = on_held
        self.held_s = held_s
        self.since: float | None = None  # at a partition's end short of ``until`` since then

    def check(self) -> None:
        if self.on_held is not None and self.since is not None and time.monotonic() - self.since > self.held_s:
            called, self.on_held = self.on_held, None
            called()


def assign_partitions(consumer: Any, partitions: Sequence[Any]) -> None:
    """``consumer.assign(partitions)`` (TopicPartitions), their topics' leaders learnt first.

    A partition assigned while its leader is unknown to the consumer waits for librdkafka's offset
    query timer (500 ms) and a metadata refresh: 0.55-1.05 s for every topic new to the consumer,
    against 0.06 s with the metadata asked for first (one small partition read to its end, measured
    here). Asking never creates a topic (consumers do not ask for that); a failure is left to the
    read that follows, which reports an unreachable cluster in its own terms."""
    from confluent_kafka import KafkaException

    for topic in sorted({tp.topic for tp in partitions}):
        with contextlib.suppress(KafkaException):
            consumer.list_topics(topic, timeout=10)
    consumer.assign(list(partitions))


def _check_read(error: Any, where: str) -> None:
    """A consumer error while reading ``where``: refused or fatal ones stop the read, others pass."""
    if error.name().endswith("AUTHORIZATION_FAILED") or error.fatal():
        raise SrmError(
            f"reading {where}: {error.str()} ({error.name()}; `srm-control acls --source A "
            "--target B` lists the ACLs a flow needs)"
        )


def delete_records_before(admin: Any, topic: str, partition: int, offset: int) -> int:
    """Delete the records of ``topic``'s ``partition`` below ``offset``; the log-start offset after it."""
    from confluent_kafka import TopicPartition

    request = [TopicPartition(topic, partition, offset)]
    results = _admin(
        lambda: admin.delete_records(request, request_timeout=ADMIN_TIMEOUT_S, operation_timeout=ADMIN_TIMEOUT_S),
        f"cannot delete records of {topic}[{partition}] below offset {offset}",
        admin,
        needs(admin, "DELETE", f"TOPIC {topic!r}"),
    )
    return int(next(iter(results.values())).low_watermark)
