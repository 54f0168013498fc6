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

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from srm.config.model import Flow, SrmConfig
from srm.errors import NotConfiguredError, UsageError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.kafka.topics import known_topic_ids, partition_counts
from srm.offsets.checkpoint_store import read_checkpoints
from srm.offsets.flow_history import FlowHistory
from srm.offsets.groups import group_offsets
from srm.offsets.history import Wanted, history_topics, load_history
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
        return self.groups([group], direction, live=live)[group]

    def groups(
        self, groups: Sequence[str], direction: Direction = "forward", *, live: bool = False
    ) -> dict[str, list[Translated]]:
        """Every partition of each of ``groups`` translated, sorted by topic and partition, with one
        read of the checkpoints, of the groups' offsets and of the history for all of them."""
        groups = list(dict.fromkeys(groups))
        if direction == "forward" and not live:
            return self._from_checkpoints(groups)
        cluster = self.flow.source if direction == "forward" else self.flow.target
        admin = clients.admin_client(self.config.cluster(cluster))
        found = group_offsets(admin, groups)
        topics = {t for g in groups for t, _ in found[g].offsets}
        keep = {t: self.selector.replicates(t) if direction == "forward" else self._copied_remote(t) for t in topics}
        positions: list[tuple[str, str, int, int]] = []
        for group in groups:
            wanted = sorted((k, c.offset) for k, c in found[group].offsets.items() if keep[k[0]])
            if not wanted:
                raise NotConfiguredError(f"group {group!r} has no committed offsets on topics of flow {self.flow.name}")
            positions += [(group, t, p, o) for (t, p), o in wanted]
        current = known_topic_ids(admin, sorted(topics)) if direction == "forward" else None
        results = self._many([(t, p, o) for _, t, p, o in positions], direction, current)
        out: dict[str, list[Translated]] = {g: [] for g in groups}
        for (group, *_), r in zip(positions, results, strict=True):
            out[group].append(replace(r, group=group))
        return out

    def _many(
        self, positions: list[tuple[str, int, int]], direction: Direction, current: dict[str, str] | None = None
    ) -> list[Translated]:
        """Translate ``positions`` (topic on the cluster the consumer leaves, partition, offset) with
        one read of the history they need, and one of the ends of the partitions it cannot place;
        ``current``: the source's topic ids, when known (see :func:`load_history`)."""
        if direction == "forward":
            keyed = [((t, p), o, t, self.selector.remote(t)) for t, p, o in positions]
            wanted = Wanted.lowest((key, o) for key, o, _, _ in keyed)
        else:  # target offsets: the partitions' runs whole
            keyed = [((self._source_topic(t), p), o, t, self._source_topic(t)) for t, p, o in positions]
            wanted = Wanted.whole(key for key, *_ in keyed)
        history = self._history or load_history(self.config, self.flow, wanted, current=current)
        reverse = reverse_flow(self.config, self.flow)
        back = None if reverse is None else load_history(self.config, reverse, Wanted.whole(wanted.partitions))
        offsets: dict[tuple[str, int], list[int]] = {}
        for key, offset, _, _ in keyed:
            offsets.setdefault(key, []).append(offset)
        if direction == "forward" and back is None:  # the runs around the offsets alone
            owns = {key: history.around(*key, at) for key, at in offsets.items()}
        else:
            owns = {key: history.get(*key) for key in offsets}
        found = [self._translate(owns[key], back, key, offset, direction) for key, offset, _, _ in keyed]
        alias = self.flow.target if direction == "forward" else self.flow.source
        missing = {(to_topic, key[1]) for (key, _, _, to_topic), at in zip(keyed, found, strict=True) if at is None}
        ends = self._ends(alias, missing)
        return [
            Translated(to_topic, key[1], ends[(to_topic, key[1])] if at is None else at, topic, offset)
            for (key, offset, topic, to_topic), at in zip(keyed, found, strict=True)
        ]

    @staticmethod
    def _translate(
        own: PartitionHistory, back: FlowHistory | None, key: tuple[str, int], offset: int, direction: Direction
    ) -> int | None:
        if back is None:
            return to_target(own, offset) if direction == "forward" else to_source(own, offset)
        other = back.get(*key)  # prefixless active/active: both flows' runs (srm.offsets.merged)
        return merged_position(own, other, offset) if direction == "forward" else merged_position(other, own, offset)

    def _from_checkpoints(self, groups: Sequence[str]) -> dict[str, list[Translated]]:
        topic = self.flow.policy.checkpoints_topic(self.flow.source)
        checkpoints = read_checkpoints(self.config.cluster(self.flow.target), topic)
        out: dict[str, list[Translated]] = {g: [] for g in groups}
        for c in sorted(checkpoints.values(), key=lambda c: (c.topic, c.partition)):
            if c.group in out:
                upstream = self._source_topic(c.topic)
                out[c.group].append(
                    Translated(c.topic, c.partition, c.downstream_offset, upstream, c.upstream_offset, c.group)
                )
        for group, found in out.items():
            if not found:
                raise NotConfiguredError(
                    f"no checkpoints for group {group!r} in {topic} on {self.flow.target}: the group has no "
                    f"committed offsets on topics of flow {self.flow.name}, or no checkpoint pass has run since "
                    "it committed"
                )
        return out

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

    def _ends(self, alias: str, keys: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The end offsets of ``keys`` on ``alias`` (one metadata and one ListOffsets call)."""
        if not keys:
            return {}
        admin = clients.admin_client(self.config.cluster(alias))
        counts = partition_counts(admin, include_internal=True)
        for topic, partition in sorted(keys):
            if partition >= counts.get(topic, 0):
                raise NotConfiguredError(f"topic {topic!r} partition {partition} does not exist on {alias}")
        return list_offsets(admin, sorted(keys), "latest")


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
    found = translator.groups(groups or [], direction, live=live or direction == "backward")
    return [t for group in found.values() for t in group]
