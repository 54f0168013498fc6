"""Partitions' offsets and records on one cluster: ends, starts and offsets for a time, waiting for
new partitions to be served, counting and reading records to the end, deleting records.

Every call retries retriable errors (see :mod:`srm.kafka.retry`) and raises SrmError naming the
partition otherwise.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from srm.errors import ClusterUnreachableError, SrmError
from srm.kafka.clients import list_metadata
from srm.kafka.retry import TOPIC_GONE, acl_hint, is_retriable, needs
from srm.kafka.topics import ADMIN_TIMEOUT_S, admin_request, named, on_cluster, partition_counts

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


def describe(admin: Any, consumer: Any, include_internal: bool = False) -> list[TopicInfo]:
    """Every topic with its partition and record counts, sorted by name.

    Counts records by reading (``consumer`` needs ``enable.partition.eof``): offsets would also
    count transaction markers. Meant for small topics (the demo, status pages of test clusters).
    """
    infos = []
    for name, count in sorted(partition_counts(admin, include_internal).items()):
        infos.append(TopicInfo(name, count, sum(record_counts(consumer, name, count).values())))
    return infos


def list_offsets(
    admin: Any, partitions: list[tuple[str, int]], spec: str, *, read_committed: bool = True, gone_ok: bool = False
) -> dict[tuple[str, int], int]:
    """``latest`` (read_committed: the last stable offset; otherwise the high watermark) or
    ``earliest`` offset of each partition; with ``gone_ok``, the partitions of topics deleted
    meanwhile are left out instead of failing the call."""
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    offset_spec = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()  # type: ignore[no-untyped-call]
    return _offsets(admin, {tp: offset_spec for tp in partitions}, read_committed=read_committed, gone_ok=gone_ok)


def offsets_for_time(admin: Any, partitions: list[tuple[str, int]], timestamp_ms: int) -> dict[tuple[str, int], int]:
    """First offset at or after ``timestamp_ms`` per partition (the end offset when none is)."""
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    found = _offsets(admin, {tp: OffsetSpec.for_timestamp(timestamp_ms) for tp in partitions})
    missing = [tp for tp, offset in found.items() if offset < 0]
    return {**found, **list_offsets(admin, missing, "latest")}


def _offsets(
    admin: Any, specs: dict[tuple[str, int], Any], *, read_committed: bool = True, gone_ok: bool = False
) -> dict[tuple[str, int], int]:
    from confluent_kafka import IsolationLevel, TopicPartition

    if not specs:
        return {}
    request = {TopicPartition(t, p): spec for (t, p), spec in specs.items()}
    results = admin_request(
        lambda: admin.list_offsets(
            request,
            isolation_level=IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED,
            request_timeout=ADMIN_TIMEOUT_S,
        ),
        "cannot list offsets of " + named({t for t, _ in specs}),
        admin,
        needs(admin, "DESCRIBE", "TOPIC " + named({t for t, _ in specs}, quoted=True)),
        skipped=TOPIC_GONE if gone_ok else (),
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
                    doing = on_cluster(admin, f"cannot list the offsets of new {where}")
                    raise SrmError(f"{doing}: {detail}") from None
                last = error
                continue
            pending.discard((tp.topic, tp.partition))
        if not pending:
            return
        if time.monotonic() > deadline:
            shown = ", ".join(f"{t}[{p}]" for t, p in sorted(pending)[:5]) + (", ..." if len(pending) > 5 else "")
            detail = last.str() if hasattr(last, "str") else str(last)
            raise ClusterUnreachableError(
                on_cluster(admin, f"{len(pending)} new partition(s) not served by their leaders")
                + f" after {timeout_s:.0f} s ({shown}: {detail}); the brokers may still be creating them",
                cluster=admin.srm_alias,
            )
        with contextlib.suppress(KafkaException):  # the next attempt says what is wrong
            list_metadata(admin, timeout_s=ADMIN_TIMEOUT_S)
        time.sleep(SERVED_POLL_S)


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
    leaves the consumer positioned at the end, to read what comes later (records fetched just
    after the end, in the batch that brought it, are read here). Gives up when nothing
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
    refusals = getattr(consumer, "refusals", _NEVER_REFUSED)  # a clients.reader's: refused credentials end the read
    try:
        while True:
            if time.monotonic() > deadline:
                waiting = f" (a transaction open since before offset {max(ends.values())})" if ends else ""
                raise SrmError(f"reading {where} to its end{waiting}: nothing for {timeout_s:.0f} s")
            held.check()
            messages = consumer.consume(10_000, 0.05)
            refusals.check(where)
            if messages:
                deadline = time.monotonic() + timeout_s
                held.since = None
            for message in messages:
                error = message.error()
                if error is None:
                    yield message
                elif error.name() == "_PARTITION_EOF" and message.offset() >= ends.get(message.partition(), 0):
                    pending.discard(message.partition())
                elif error.name() == "_PARTITION_EOF":
                    held.since = time.monotonic()
                else:
                    _check_read(error, where)
            if not pending:  # the batch read whole: a consumer kept assigned is past its records
                return
    finally:
        if not keep_assigned:
            consumer.unassign()


class _NeverRefused:
    """The refusals of a consumer not built by clients.reader: none are watched."""

    def check(self, where: str) -> None:
        return None


_NEVER_REFUSED = _NeverRefused()


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
    results = admin_request(
        lambda: admin.delete_records(request, request_timeout=ADMIN_TIMEOUT_S, operation_timeout=ADMIN_TIMEOUT_S),
        f"cannot delete records of {topic}[{partition}] below offset {offset}",
        admin,
        needs(admin, "DELETE", f"TOPIC {topic!r}"),
    )
    return int(next(iter(results.values())).low_watermark)
