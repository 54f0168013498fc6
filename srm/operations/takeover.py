"""Taking over a flow from a stopped MirrorMaker 2: no record copied twice, none skipped.

MirrorMaker 2 (dedicated mode) keeps where it got to as Kafka Connect source offsets in
``mm2-offsets.<source>.internal`` on the target: per source partition, the offset of the last
record whose copy it *committed*. It commits every ``offset.flush.interval.ms``, so the records
after that offset may already be on the target too (a restarted MM2 copies them again: it is
at-least-once). A takeover therefore does not trust the committed offset alone: it lines up each
remote partition with its source partition, record by record (key, value, headers and timestamp
are copied unchanged), which gives

- where the target really stands: the next source offset after the last record on the target;
- the exact offset runs of everything MM2 copied (source offset -> target offset), so that the
  checkpoint job translates the groups of the MM2 era exactly, as it does its own;
- how many records MM2 itself wrote twice (after a restart), and how many it had copied past its
  last commit.

Applying writes our progress (the next source offset) and those runs into the flow's progress and
history topics in one Kafka transaction, so the flow's next run starts exactly there. MM2's own
offset syncs and checkpoints stay where they are: groups that already failed over with MM2's
checkpoints keep them, and ours continue the same checkpoints topic.

Lining up reads every record of the remote topics once (and their source partitions whole): a
one-time cost of the takeover, logged per partition.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srm.config.model import Flow, SrmConfig
from srm.config.properties import parse_properties
from srm.errors import NotConfiguredError, SrmError
from srm.kafka import clients
from srm.kafka.internal_topics import (
    ensure_internal_topic,
    flow_internal_topics,
    history_topic_name,
    progress_topic_name,
)
from srm.kafka.partitions import list_offsets, read_to_end
from srm.kafka.topics import broker_count, partition_counts, topic_ids
from srm.mm2.records import OffsetRunsRecord, ProgressRecord
from srm.replication.kafka_errors import transactional_prefix
from srm.replication.runs import OffsetRun, RunTracker

log = logging.getLogger(__name__)
Key = tuple[str, int]  # source topic, partition


class TakeoverError(SrmError):
    """The target holds something a takeover cannot account for, or the flow already ran."""


@dataclass(frozen=True)
class PartitionTakeover:
    """Where one source partition stands after MirrorMaker 2, and where our flow starts."""

    topic: str
    partition: int
    remote: str
    topic_id: str
    mm2_next: int | None  # MM2's committed Connect offset + 1; None if it committed none
    next_offset: int  # ours: one past the last source record the target holds
    copied: int  # records of the source on the target (each counted once)
    duplicated: int  # target records that repeat a record already copied (MM2 wrote them twice)
    unmatched: int  # target records whose original is gone from the source (or that MM2 did not write)
    runs: tuple[OffsetRun, ...] = field(repr=False)

    @property
    def past_commit(self) -> int | None:
        """Records MM2 had copied past its last committed offset (a restarted MM2 would copy them again)."""
        return None if self.mm2_next is None else self.next_offset - self.mm2_next

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "remote_topic": self.remote,
            "mm2_committed_next_offset": self.mm2_next,
            "next_offset": self.next_offset,
            "copied_past_mm2_commit": self.past_commit,
            "records_on_target": self.copied,
            "duplicated_by_mm2": self.duplicated,
            "without_original": self.unmatched,
            "runs": len(self.runs),
        }


def offsets_topic(properties: Path, flow: Flow) -> str:
    """The Connect offsets topic of MM2's flow source->target named in ``properties`` (MM2's default:
    ``mm2-offsets.<source>.internal``, on the target)."""
    try:
        entries = {p.key: p.value for p in parse_properties(properties.read_text())}
    except OSError as exc:
        raise NotConfiguredError(f"cannot read {properties}: {exc.strerror}") from None
    aliases = {a.strip() for a in entries.get("clusters", "").split(",") if a.strip()}
    missing = {flow.source, flow.target} - aliases
    if missing:
        raise NotConfiguredError(
            f"{properties}: clusters = {entries.get('clusters', '')!r} does not name {', '.join(sorted(missing))}; "
            f"the flow {flow.name} must use MM2's cluster aliases (remote topics are named after them)"
        )
    for key in (f"{flow.source}->{flow.target}.offset.storage.topic", "offset.storage.topic"):
        if entries.get(key):
            return entries[key]
    return f"mm2-offsets.{flow.source}.internal"


def mm2_positions(config: SrmConfig, flow: Flow, topic: str) -> dict[Key, int]:
    """Per source partition, the next offset MM2 committed (its Connect offset + 1), from ``topic`` on the target."""
    target = config.cluster(flow.target)
    admin = clients.admin_client(target)
    partitions = partition_counts(admin, include_internal=True).get(topic)
    if partitions is None:
        raise NotConfiguredError(
            f"no topic {topic!r} on {flow.target}: MirrorMaker 2 never ran the flow {flow.name} there "
            "(or give the properties file of the MM2 that did)"
        )
    consumer = clients.reader(target, "srm-takeover")
    found: dict[Key, int] = {}
    try:
        # All partitions at once (Connect's offsets topic has 25): a key stays in one partition, in order.
        for message in read_to_end(consumer, topic, range(partitions)):
            key = connect_partition(message.key(), flow.source)
            if key is None:
                continue
            value = message.value()
            if value is None:  # a tombstone: the connector's offsets were reset
                found.pop(key, None)
                continue
            found[key] = int(json.loads(value)["offset"]) + 1
    finally:
        consumer.close()
    return found


def connect_partition(raw: bytes | None, source: str) -> Key | None:
    """(topic, partition) of a Connect source offset key of ``source``'s MirrorSourceConnector:
    ``["<connector name>", {"cluster": "<source>", "partition": 0, "topic": "orders"}]`` (the name is
    ``MirrorSourceConnector`` in dedicated mode, any name on a Connect cluster)."""
    try:
        _, spec = json.loads(raw or b"null")
    except (TypeError, ValueError):
        return None
    if not isinstance(spec, dict) or spec.get("cluster") != source or not {"topic", "partition"} <= spec.keys():
        return None
    return str(spec["topic"]), int(spec["partition"])


def plan(config: SrmConfig, flow: Flow, properties: Path) -> list[PartitionTakeover]:
    """Line every remote partition up with its source partition; nothing is written."""
    from srm.replication.selector import TopicSelector

    committed = mm2_positions(config, flow, offsets_topic(properties, flow))
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    source_admin, target_admin = clients.admin_client(source), clients.admin_client(target)
    selector = TopicSelector(flow)
    topics = {t: n for t, n in partition_counts(source_admin, include_internal=True).items() if selector.replicates(t)}
    remotes = partition_counts(target_admin, include_internal=True)
    ids = topic_ids(source_admin, sorted(topics))
    copied = {t: n for t, n in topics.items() if flow.policy.format_remote_topic(flow.source, t) in remotes}
    # MM2 never copied the others: the flow starts them as any new topic.
    earliest = list_offsets(source_admin, [(t, p) for t, n in copied.items() for p in range(n)], "earliest")
    plans = []
    originals, copies = DigestReader(source, "read_uncommitted"), DigestReader(target, "read_committed")
    try:
        for topic, count in sorted(copied.items()):
            remote = flow.policy.format_remote_topic(flow.source, topic)
            for partition in range(count):
                key = (topic, partition)
                mm2_next = committed.get(key)
                lined = line_up(originals, copies, key, remote, earliest=earliest[key], mm2_next=mm2_next)
                plans.append(
                    PartitionTakeover(
                        topic,
                        partition,
                        remote,
                        ids[topic],
                        mm2_next,
                        lined.next_offset,
                        lined.copied,
                        lined.duplicated,
                        lined.unmatched,
                        tuple(lined.runs),
                    )
                )
                log.info("lined up %s[%d] with %s[%d]: %s", topic, partition, remote, partition, plans[-1].as_dict())
    finally:
        originals.close()
        copies.close()
    return plans


@dataclass
class LinedUp:
    next_offset: int
    copied: int = 0
    duplicated: int = 0
    unmatched: int = 0
    runs: list[OffsetRun] = field(default_factory=list)


def line_up(
    originals: DigestReader, copies: DigestReader, key: Key, remote: str, *, earliest: int, mm2_next: int | None
) -> LinedUp:
    """Pair every record of ``remote``[p] on the target with the source record it copies, in order.

    The source is read whole into an index (digest -> offsets), aborted records included (MM2 reads
    read_uncommitted unless told otherwise), so a copy whose original is further on (the source
    compacted, or a gap) is still found. A target record matching only originals before the one
    expected is a second copy (MM2 restarted); one matching none has lost its original (retention,
    compaction) or was not written by MM2: it is counted, and moves nothing. Where MM2 committed
    further than the copies found (copies removed from the target since), its commit wins: it only
    commits records the target acknowledged. ``earliest``: the source partition's first offset."""
    topic, partition = key
    floor = earliest if mm2_next is None else max(earliest, mm2_next)
    found = list(copies.digests(remote, partition))
    if not found:
        return LinedUp(floor)
    return pair(found, originals.digests(topic, partition), earliest, floor)


def pair(copies: list[tuple[int, bytes]], originals: Iterable[tuple[int, bytes]], earliest: int, floor: int) -> LinedUp:
    """Line ``copies`` (target offset, digest) up with ``originals`` (source offset, digest), both in
    offset order; ``floor``: where the flow starts at the earliest (MM2's commit)."""
    index: dict[bytes, list[int]] = {}
    for offset, digest in originals:
        index.setdefault(digest, []).append(offset)
    lined, tracker, expected = LinedUp(floor), RunTracker(), earliest
    for target_offset, digest in copies:
        found = index.get(digest, [])
        at = bisect.bisect_left(found, expected)
        if at < len(found):
            tracker.add(found[at], target_offset)
            lined.copied += 1
            expected = found[at] + 1
        elif found:
            lined.duplicated += 1
        else:
            lined.unmatched += 1
    lined.runs = tracker.finish()
    lined.next_offset = max(expected, floor)
    return lined


class DigestReader:
    """Reads partitions of one cluster whole, one after another, with one consumer for the whole
    plan (not a consumer of its own per partition: a heartbeats topic of each cluster a flow ever
    came from makes many small partitions to line up)."""

    def __init__(self, cluster: Any, isolation: str) -> None:
        self.consumer = clients.reader(cluster, "srm-takeover", **{"isolation.level": isolation})

    def digests(self, topic: str, partition: int) -> Iterator[tuple[int, bytes]]:
        """(offset, digest of key, value and headers) of every record of one partition. Timestamps
        are left out: a topic with LogAppendTime on one side would match nothing; the order does the rest."""
        for message in read_to_end(self.consumer, topic, partition):
            digest = hashlib.blake2b(digest_size=16)
            headers = message.headers() or []
            for part in (message.key(), message.value(), *(b for h in headers for b in (h[0].encode(), h[1]))):
                digest.update(b"\x00" if part is None else b"\x01" + len(part).to_bytes(4, "big") + part)
            digest.update(len(headers).to_bytes(4, "big"))
            yield message.offset(), digest.digest()

    def close(self) -> None:
        self.consumer.close()


def refuse_if_started(config: SrmConfig, flow: Flow) -> None:
    """A takeover only starts a flow that never ran: raise if its progress topic holds anything."""
    target = config.cluster(flow.target)
    topic = progress_topic_name(flow)
    if topic not in partition_counts(clients.admin_client(target), include_internal=True):
        return
    consumer = clients.reader(target, "srm-takeover")
    try:
        found = [ProgressRecord.from_message(m) for m in read_to_end(consumer, topic, 0)]
    finally:
        consumer.close()
    if found:
        named = ", ".join(f"{r.topic}[{r.partition}]@{r.next_offset}" for r in found[:5])
        raise TakeoverError(
            f"flow {flow.name} has already copied ({named}{', ...' if len(found) > 5 else ''}): "
            "a takeover only starts a flow that never ran; nothing was written"
        )


def apply(config: SrmConfig, flow: Flow, plans: list[PartitionTakeover]) -> None:
    """Write the progress and the runs of ``plans`` in one transaction; refused once the flow has progress."""
    from confluent_kafka import KafkaException

    target = config.cluster(flow.target)
    for topic in flow_internal_topics(flow):
        admin = clients.admin_client(config.cluster(topic.cluster))
        ensure_internal_topic(admin, topic, broker_count(admin))
    refuse_if_started(config, flow)
    producer = clients.producer(
        target, **{"transactional.id": f"{transactional_prefix(flow.source, flow.target)}takeover"}
    )
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        for p in plans:
            runs = tuple((r.source_first, r.target_first, r.length) for r in p.runs)
            for history in OffsetRunsRecord.batches(p.topic, p.partition, p.topic_id, p.next_offset, runs):
                producer.produce(history_topic_name(flow), **history.as_produce_kwargs())
            progress = ProgressRecord(p.topic, p.partition, p.topic_id, p.next_offset)
            producer.produce(progress_topic_name(flow), **progress.as_produce_kwargs())
        producer.commit_transaction(60)
    except KafkaException as exc:
        raise TakeoverError(f"writing the takeover of {flow.name} to {flow.target}: {exc.args[0].str()}") from None
