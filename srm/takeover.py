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

Lining up reads every record of the remote topics once (and the same span of the source): a
one-time cost of the takeover, logged per partition.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srm import clients
from srm.config.model import Flow, SrmConfig
from srm.config.properties import parse_properties
from srm.errors import NotConfiguredError, SrmError
from srm.internal_topics import ensure_internal_topic, flow_internal_topics, history_topic_name, progress_topic_name
from srm.records import OffsetRunsRecord, ProgressRecord
from srm.replication.kafka_errors import transactional_prefix
from srm.replication.runs import OffsetRun, RunTracker
from srm.topics import broker_count, list_offsets, partition_counts, read_to_end, topic_ids

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
    consumer = clients.consumer(target, "srm-takeover", **{"enable.partition.eof": True})
    found: dict[Key, int] = {}
    try:
        for partition in range(partitions):
            for message in read_to_end(consumer, topic, partition):
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
    plans = []
    for topic, count in sorted(topics.items()):
        remote = flow.policy.format_remote_topic(flow.source, topic)
        if remote not in remotes:
            continue  # MM2 never copied it: the flow starts it as any new topic
        for partition in range(count):
            lined = line_up(source, target, (topic, partition), remote)
            plans.append(
                PartitionTakeover(
                    topic,
                    partition,
                    remote,
                    ids[topic],
                    committed.get((topic, partition)),
                    lined.next_offset,
                    lined.copied,
                    lined.duplicated,
                    tuple(lined.runs),
                )
            )
            log.info("lined up %s[%d] with %s[%d]: %s", topic, partition, remote, partition, plans[-1].as_dict())
    return plans


@dataclass
class LinedUp:
    next_offset: int
    copied: int = 0
    duplicated: int = 0
    runs: list[OffsetRun] = field(default_factory=list)


def line_up(source: Any, target: Any, key: Key, remote: str) -> LinedUp:
    """Pair every record of ``remote``[p] on the target with the source record it copies."""
    topic, partition = key
    (earliest,) = list_offsets(clients.admin_client(source), [key], "earliest").values()
    copies = list(_digests(target, remote, partition))
    if not copies:
        return LinedUp(earliest)
    originals = _digests(source, topic, partition)
    first_digest = copies[0][1]
    seen: set[bytes] = set()
    tracker = RunTracker()
    original = next(originals, None)
    while original is not None and original[1] != first_digest:  # the target's first record; older ones expired
        original = next(originals, None)
    lined = LinedUp(earliest)
    for target_offset, digest in copies:
        if original is not None and digest == original[1]:
            tracker.add(original[0], target_offset)
            seen.add(digest)
            lined.copied += 1
            lined.next_offset = original[0] + 1
            original = next(originals, None)
        elif digest in seen:
            lined.duplicated += 1
        else:
            raise TakeoverError(
                f"{remote}[{partition}] offset {target_offset} on the target is no copy of a record of "
                f"{topic}[{partition}] at or after source offset {lined.next_offset}: something else wrote to the "
                "remote topic, or MM2 copied with a different policy; nothing was written"
            )
    lined.runs = tracker.finish()
    return lined


def _digests(cluster: Any, topic: str, partition: int) -> Iterator[tuple[int, bytes]]:
    """(offset, digest of key, value, headers and timestamp) of every committed record of one partition."""
    consumer = clients.consumer(cluster, "srm-takeover", **{"enable.partition.eof": True})
    try:
        for message in read_to_end(consumer, topic, partition):
            digest = hashlib.blake2b(digest_size=16)
            for part in (message.key(), message.value()):
                digest.update(b"\x00" if part is None else b"\x01" + len(part).to_bytes(4, "big") + part)
            for name, value in message.headers() or []:
                digest.update(name.encode() + b"\x00" + (b"" if value is None else value))
            digest.update(message.timestamp()[1].to_bytes(8, "big", signed=True))
            yield message.offset(), digest.digest()
    finally:
        consumer.close()


def refuse_if_started(config: SrmConfig, flow: Flow) -> None:
    """A takeover only starts a flow that never ran: raise if its progress topic holds anything."""
    target = config.cluster(flow.target)
    topic = progress_topic_name(flow)
    if topic not in partition_counts(clients.admin_client(target), include_internal=True):
        return
    consumer = clients.consumer(target, "srm-takeover", **{"enable.partition.eof": True})
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
            history = OffsetRunsRecord(p.topic, p.partition, p.topic_id, p.next_offset, runs)
            progress = ProgressRecord(p.topic, p.partition, p.topic_id, p.next_offset)
            producer.produce(history_topic_name(flow), **history.as_produce_kwargs())
            producer.produce(progress_topic_name(flow), **progress.as_produce_kwargs())
        producer.commit_transaction(60)
    except KafkaException as exc:
        raise TakeoverError(f"writing the takeover of {flow.name} to {flow.target}: {exc.args[0].str()}") from None
