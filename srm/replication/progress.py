"""Replication progress: where the copy of each source partition stands, stored on the target.

Progress is a record per source partition in the compacted topic ``srm-offsets.<source>.internal``
on the target (:class:`srm.mm2.records.ProgressRecord`), written in the same Kafka transaction as the
records it counts, so the target can never hold records its progress does not count, or count
records it does not hold. Its offset is the next *source* offset to copy; it carries the source
topic id, which changes when a topic is recreated. It is read read_committed past its last
stable offset, until every transaction open when the read began has ended (the other slots'
transactions of this run last ~100 ms; the run's claim of the flow aborted those of earlier
runs): a record committed after another slot's transaction began is read too. A copier that
died with its Python worker leaves its transaction open until transaction.timeout.ms (2 minutes):
a copier whose read it holds fences the other slots' producers (:meth:`CopyLoop.add`).

Continuous mode does not write a progress record in every transaction
(:mod:`srm.replication.writer`): every transaction holds a history record per partition it moved
(``srm-offset-syncs.<source>.internal``), with the same next offset, and the history is the
journal the progress topic is a snapshot of. A *journaled* progress record names the history
offset from which later history records of its partition may follow; reading the progress then
reads the history from there to its end and takes each such partition's latest history record.
The copier writes a plain progress record once a partition has been quiet for a moment
(``PROGRESS_EVERY_S``), so a partition that stays quiet never needs the history read again.

A compacted topic never expires, unlike consumer-group offsets (``offsets.retention.minutes``),
and writing it needs no ``send_offsets_to_transaction``, whose librdkafka implementation can hang
past its timeout once the group coordinator was down (librdkafka issues #5456 and #5511).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

from srm.config.model import Cluster, Flow
from srm.errors import RecordFormatError
from srm.kafka.internal_topics import history_topic_name, progress_topic_name
from srm.kafka.partitions import list_offsets, read_to_end
from srm.kafka.retry import retrying
from srm.mm2.records import OffsetRunsRecord, ProgressRecord, is_opener
from srm.replication.ownership import end_hanging_transactions

log = logging.getLogger(__name__)
Key = tuple[str, int]  # source topic, partition


def progress_group(source: str) -> str:
    """The group id of the flow's readers of its internal topics (they never commit to it)."""
    return f"__srm.replicate.{source}"


@dataclass(frozen=True)
class Progress:
    next_offset: int
    topic_id: str  # "" when unknown
    # The latest progress record is journaled: the copier that goes on from here writes a plain one
    # soon, so later readers need not read the history.
    journaled: bool = False


def read_progress(
    consumer: Any, admin: Any, flow: Flow, partitions: list[Key], on_held: Callable[[], None] | None = None
) -> dict[Key, Progress]:
    """The progress of ``partitions`` (source topic, partition) in the progress topic (and the
    history it journals to); a partition without any is missing. ``consumer``: a read_committed
    consumer of the target with ``enable.partition.eof``; ``admin``: an admin client of the target.
    ``on_held``: called once when a transaction left open holds the read (:func:`srm.kafka.partitions.read_to_end`)."""
    if not partitions:
        return {}
    wanted = set(partitions)
    found: dict[Key, Progress] = {}
    journal: dict[Key, int] = {}  # journaled partitions: where their later history may start
    topic = progress_topic_name(flow)
    exists = retrying(
        lambda: consumer.list_topics(topic, timeout=30), f"cannot look up {topic}", cluster=flow.target
    ).topics[topic]
    held = read_to_end(consumer, topic, 0, until=_ends(admin, topic), on_held=on_held) if exists.error is None else ()
    for message in held:
        try:
            record = ProgressRecord.from_message(message)
        except RecordFormatError as exc:  # never stop a flow over one unreadable record
            log.error("ignored: %s", exc)
            continue
        key = (record.topic, record.partition)
        if key in wanted:
            found[key] = Progress(record.next_offset, record.topic_id, record.journaled)
            journal.pop(key, None)
            if record.journaled:
                journal[key] = record.history_from
    if journal:
        found.update(_journal(consumer, admin, flow, journal, on_held))
    return found


def journal_start(consumer: Any, admin: Any, flow: Flow) -> int | None:
    """The lowest history offset a partition's latest progress record is journaled from: what of the
    history topic reading the progress still needs (None: no record is journaled). The progress
    topic is read whole (compacted: a record per partition, plus what the cleaner has not reached)."""
    topic = progress_topic_name(flow)
    latest: dict[Key, int] = {}
    for message in read_to_end(consumer, topic, 0, until=_ends(admin, topic)):
        try:
            record = ProgressRecord.from_message(message)
        except RecordFormatError:
            continue  # read_progress logs it
        latest[(record.topic, record.partition)] = record.history_from
    journaled = [at for at in latest.values() if at >= 0]
    return min(journaled) if journaled else None


def _ends(admin: Any, topic: str) -> dict[int, int]:
    """Where reading ``topic`` must reach: its high watermark now (the records of transactions still
    open included), so the records committed before the read began are all read."""
    return {0: list_offsets(admin, [(topic, 0)], "latest", read_committed=False)[(topic, 0)]}


def _journal(
    consumer: Any, admin: Any, flow: Flow, journal: dict[Key, int], on_held: Callable[[], None] | None = None
) -> dict[Key, Progress]:
    """The latest history record of each journaled partition, read from the lowest history offset
    they name to the history's end (read_committed: aborted transactions are skipped)."""
    topic = history_topic_name(flow)
    start = min(journal.values())
    low = list_offsets(admin, [(topic, 0)], "earliest")[(topic, 0)]
    until = _ends(admin, topic)
    # Kept a week (srm.kafka.internal_topics): a flow stopped that long right after a crash; or deleted
    # and created again since the progress record named it (its offsets started over).
    gone = sorted(key for key, at in journal.items() if at < low or at > until[0])
    if gone:
        log.error(
            "%s spans offsets %d up to %d, which misses the history the progress of %s names (deleted "
            "by retention, or the topic was deleted and created again): that progress may be behind what "
            "the target holds, and the records after it copied again",
            *(topic, low, until[0], ", ".join(f"{t}[{p}] from offset {journal[(t, p)]}" for t, p in gone)),
        )
    latest: dict[Key, Progress] = {}
    for message in read_to_end(consumer, topic, 0, start=max(start, low), until=until, on_held=on_held):
        if is_opener(message):  # it restates committed progress: never newer than the record after it
            continue
        try:
            record = OffsetRunsRecord.from_message(message)
        except RecordFormatError as exc:
            log.error("ignored: %s", exc)
            continue
        key = (record.topic, record.partition)
        if key in journal and message.offset() >= journal[key]:
            latest[key] = Progress(record.next_offset, record.topic_id, journaled=True)
    return latest


def read_flow_progress(
    cluster: Cluster, flow: Flow, partitions: list[Key], admin: Any | None = None
) -> dict[Key, Progress]:
    """``read_progress`` with a consumer of its own (driver side); ``admin``: the caller's admin
    client of ``cluster``, else one of its own."""
    from srm.kafka import clients

    consumer = clients.reader(cluster, progress_group(flow.source))
    on_held = partial(end_hanging_transactions, cluster, flow)
    try:
        return read_progress(consumer, admin or clients.admin_client(cluster), flow, partitions, on_held)
    finally:
        consumer.close()
