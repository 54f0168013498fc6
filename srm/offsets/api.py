"""Offset translation for applications, the CLI, the failover DAG and the REST API.

    translator = Translator(config, config.flow("us-west", "us-east"))
    translator.offset("orders", 3, 1200)                       # source offset -> target
    translator.offset("us-west.orders", 3, 870, "backward")   # target offset -> back to the source
    translator.group("billing")                               # from the checkpoints on the target
    translator.group("billing", "backward")                   # a failed-over group, back to the source

Forward group translation reads the checkpoints on the target, so it works while the source
cluster is down (failover); ``live=True`` reads the group's offsets on the source instead.
A partition the flow never copied a record of translates to the end of its remote partition
(0 for an empty one): a consumer starting there misses nothing that is copied later.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from srm.config.model import Flow, SrmConfig
from srm.errors import NotConfiguredError, UsageError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.kafka.topics import partition_counts
from srm.offsets.checkpoint_store import read_checkpoints
from srm.offsets.groups import group_offsets
from srm.offsets.history import FlowHistory, Wanted, history_topics, load_history
from srm.offsets.merged import merged_position, reverse_flow
from srm.offsets.translate import PartitionHistory, to_source, to_target
from srm.replication.selector import TopicSelector

Direction = Literal["forward", "backward"]


@dataclass(frozen=True)
class Translated:
    """Where a consumer resumes on the other cluster."""

    topic: str
    partition: int
    offset: int
    from_topic: str
    from_offset: int
    group: str | None = None


class Translator:
    """``history``: the flow's history to translate with (every lookup reads what it needs from the
    warehouse and the history topic otherwise)."""

    def __init__(self, config: SrmConfig, flow: Flow, history: FlowHistory | None = None) -> None:
        self.config = config
        self.flow = flow
        self.selector = TopicSelector(flow)
        self._history = history

    def offset(self, topic: str, partition: int, offset: int, direction: Direction = "forward") -> Translated:
        """Translate one offset; ``topic`` is the topic on the cluster the consumer leaves."""
        return self._many([(topic, partition, offset)], direction)[0]

    def group(self, group: str, direction: Direction = "forward", *, live: bool = False) -> list[Translated]:
        """Every partition of ``group`` translated, sorted by topic and partition."""
        if direction == "forward" and not live:
            return self._from_checkpoints(group)
        cluster = self.flow.source if direction == "forward" else self.flow.target
        found = group_offsets(clients.admin_client(self.config.cluster(cluster)), [group])[group].offsets
        if direction == "forward":
            wanted = {k: v for k, v in found.items() if self.selector.replicates(k[0])}
        else:
            wanted = {k: v for k, v in found.items() if self._copied_remote(k[0])}
        if not wanted:
            raise NotConfiguredError(f"group {group!r} has no committed offsets on topics of flow {self.flow.name}")
        results = self._many([(t, p, committed.offset) for (t, p), committed in sorted(wanted.items())], direction)
        return [Translated(r.topic, r.partition, r.offset, r.from_topic, r.from_offset, group) for r in results]

    def _many(self, positions: list[tuple[str, int, int]], direction: Direction) -> list[Translated]:
        """Translate ``positions`` (topic on the cluster the consumer leaves, partition, offset) with
        one read of the history they need."""
        if direction == "forward":
            keyed = [((t, p), o, t, self.selector.remote(t)) for t, p, o in positions]
            wanted = Wanted.lowest((key, o) for key, o, _, _ in keyed)
        else:  # target offsets: the partitions' runs whole
            keyed = [((self._source_topic(t), p), o, t, self._source_topic(t)) for t, p, o in positions]
            wanted = Wanted.whole(key for key, *_ in keyed)
        history = self._history or load_history(self.config, self.flow, wanted)
        reverse = reverse_flow(self.config, self.flow)
        back = None if reverse is None else load_history(self.config, reverse, Wanted.whole(wanted.partitions))
        out = []
        for (source_topic, partition), offset, topic, to_topic in keyed:
            if direction == "forward" and back is None:  # the runs around the offset alone
                own = history.around(source_topic, partition, [offset])
            else:
                own = history.get(source_topic, partition)
            translated = self._translate(own, back, (source_topic, partition), offset, direction)
            if translated is None:
                alias = self.flow.target if direction == "forward" else self.flow.source
                translated = self._end(alias, to_topic, partition)
            out.append(Translated(to_topic, partition, translated, topic, offset))
        return out

    @staticmethod
    def _translate(
        own: PartitionHistory, back: FlowHistory | None, key: tuple[str, int], offset: int, direction: Direction
    ) -> int | None:
        if back is None:
            return to_target(own, offset) if direction == "forward" else to_source(own, offset)
        other = back.get(*key)  # prefixless active/active: both flows' runs (srm.offsets.merged)
        return merged_position(own, other, offset) if direction == "forward" else merged_position(other, own, offset)

    def _from_checkpoints(self, group: str) -> list[Translated]:
        topic = self.flow.policy.checkpoints_topic(self.flow.source)
        checkpoints = read_checkpoints(self.config.cluster(self.flow.target), topic)
        mine = sorted((c for c in checkpoints.values() if c.group == group), key=lambda c: (c.topic, c.partition))
        if not mine:
            raise NotConfiguredError(
                f"no checkpoints for group {group!r} in {topic} on {self.flow.target}: the group has no committed "
                f"offsets on topics of flow {self.flow.name}, or no checkpoint pass has run since it committed"
            )
        return [
            Translated(c.topic, c.partition, c.downstream_offset, self._source_topic(c.topic), c.upstream_offset, group)
            for c in mine
        ]

    def _upstream(self, remote: str) -> str | None:
        """The source topic whose remote topic ``remote`` is, by name."""
        upstream = self.flow.policy.upstream_topic(remote)
        return upstream if upstream is not None and self.selector.remote(upstream) == remote else None

    def _copied_remote(self, remote: str) -> bool:
        """Is ``remote`` a remote topic the flow copied records into?"""
        upstream = self._upstream(remote)
        if upstream is None:
            return False
        if self._history is not None:
            return any(t == upstream for t, _ in self._history.partitions)
        return bool(history_topics(self.config, self.flow, [upstream]))

    def _source_topic(self, remote: str) -> str:
        upstream = self._upstream(remote)
        if upstream is None:
            raise NotConfiguredError(f"{remote!r} is not a remote topic of flow {self.flow.name}")
        return upstream

    def _end(self, alias: str, topic: str, partition: int) -> int:
        admin = clients.admin_client(self.config.cluster(alias))
        if partition >= partition_counts(admin, include_internal=True).get(topic, 0):
            raise NotConfiguredError(f"topic {topic!r} partition {partition} does not exist on {alias}")
        return list_offsets(admin, [(topic, partition)], "latest")[(topic, partition)]


def translate(
    config: SrmConfig,
    flow: Flow,
    direction: Direction,
    *,
    groups: list[str] | None = None,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
    live: bool = False,
) -> list[Translated]:
    """What ``srm-control translate`` and ``GET /v2/translate`` answer: every partition of ``groups``,
    or one offset (``topic``, ``partition``, ``offset`` on the cluster the consumer leaves)."""
    parts = (topic, partition, offset)
    if groups is not None and any(v is not None for v in parts):
        raise UsageError("give either a group or a topic, partition and offset")
    if groups is None and any(v is None for v in parts):
        raise UsageError("give a group, or all of topic, partition and offset")
    if groups is not None and not groups:
        raise UsageError("a group needs a name")
    translator = Translator(config, flow)
    if topic is not None and partition is not None and offset is not None:
        return [translator.offset(topic, partition, offset, direction)]
    found: list[Translated] = []
    for group in groups or []:
        found += translator.group(group, direction, live=live or direction == "backward")
    return found
