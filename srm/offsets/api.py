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
from functools import cached_property
from typing import Literal

from srm import clients
from srm.config.model import Flow, SrmConfig
from srm.errors import NotConfiguredError, UsageError
from srm.offsets.checkpoint_store import read_checkpoints
from srm.offsets.groups import group_offsets
from srm.offsets.history import FlowHistory, load_history
from srm.offsets.merged import merged_position, reverse_flow
from srm.offsets.translate import to_source, to_target
from srm.replication.selector import TopicSelector
from srm.topics import list_offsets, partition_counts

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
    def __init__(self, config: SrmConfig, flow: Flow, history: FlowHistory | None = None) -> None:
        self.config = config
        self.flow = flow
        self.selector = TopicSelector(flow)
        self._history = history

    @property
    def history(self) -> FlowHistory:
        if self._history is None:
            self._history = load_history(self.config, self.flow)
        return self._history

    @cached_property
    def back_history(self) -> FlowHistory | None:
        """The history of target -> source when both are prefixless active/active (srm.offsets.merged)."""
        reverse = reverse_flow(self.config, self.flow)
        return None if reverse is None else load_history(self.config, reverse)

    def offset(self, topic: str, partition: int, offset: int, direction: Direction = "forward") -> Translated:
        """Translate one offset; ``topic`` is the topic on the cluster the consumer leaves."""
        back = self.back_history
        if direction == "forward":
            own = self.history.get(topic, partition)
            translated = (
                to_target(own, offset) if back is None else merged_position(own, back.get(topic, partition), offset)
            )
            out = self.selector.remote(topic)
            if translated is None:
                translated = self._end(self.flow.target, out, partition)
        else:
            source_topic = self._source_topic(topic)
            out = source_topic
            own = self.history.get(source_topic, partition)
            if back is None:
                translated = to_source(own, offset)
            else:  # from the target's side: the flow back's forward translation
                translated = merged_position(back.get(source_topic, partition), own, offset)
            if translated is None:
                translated = self._end(self.flow.source, source_topic, partition)
        return Translated(out, partition, translated, topic, offset)

    def group(self, group: str, direction: Direction = "forward", *, live: bool = False) -> list[Translated]:
        """Every partition of ``group`` translated, sorted by topic and partition."""
        if direction == "forward" and not live:
            return self._from_checkpoints(group)
        cluster = self.flow.source if direction == "forward" else self.flow.target
        found = group_offsets(clients.admin_client(self.config.cluster(cluster)), [group])[group].offsets
        if direction == "forward":
            wanted = {k: v for k, v in found.items() if self.selector.replicates(k[0])}
        else:
            remotes = {self.selector.remote(t) for t, _ in self.history.partitions}
            wanted = {k: v for k, v in found.items() if k[0] in remotes}
        if not wanted:
            raise NotConfiguredError(f"group {group!r} has no committed offsets on topics of flow {self.flow.name}")
        results = [self.offset(t, p, committed.offset, direction) for (t, p), committed in sorted(wanted.items())]
        return [Translated(r.topic, r.partition, r.offset, r.from_topic, r.from_offset, group) for r in results]

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

    def _source_topic(self, remote: str) -> str:
        for topic, _ in self.history.partitions:
            if self.selector.remote(topic) == remote:
                return topic
        upstream = self.flow.policy.upstream_topic(remote)
        if upstream is not None and self.flow.policy.topic_source(remote) == self.flow.source:
            return upstream
        raise NotConfiguredError(f"{remote!r} is not a remote topic of flow {self.flow.name}")

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
