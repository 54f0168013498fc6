"""One checkpoint pass of a flow A->B (``srm/jobs/checkpoints.py``).

Forward: A's consumer groups that pass the flow's group filter and have committed offsets on
topics the flow replicates are translated exactly (:mod:`.translate`) and written as MM2 checkpoints
to ``A.checkpoints.internal`` on B, per key never backwards unless the group rewound; then, with
``sync.group.offsets.enabled``, into B's idle groups (:mod:`.group_sync`).

Backward (failback): B's groups with committed offsets on the flow's remote topics (``A.t``) are
translated back to ``t`` on A and written to ``B.checkpoints.internal`` on A, so a group that
failed over to B can return to A without losing or re-reading a record.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from srm.config.filters import NameFilter, should_replicate_group
from srm.config.model import Flow, SrmConfig
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.control_lists import read_lists
from srm.kafka.internal_topics import InternalTopic, checkpoints_topic, ensure_internal_topic
from srm.kafka.partitions import list_offsets
from srm.kafka.topics import broker_count, known_topic_ids, partition_counts
from srm.mm2.records import Checkpoint
from srm.offsets.checkpoint_store import monotonic, read_checkpoints, write_checkpoints
from srm.offsets.flow_history import FlowHistory
from srm.offsets.group_sync import SyncReport, sync_group_offsets
from srm.offsets.groups import group_offsets, list_groups
from srm.offsets.history import Wanted, history_topics, load_history, topic_tail
from srm.offsets.merged import merged_position, reverse_flow
from srm.offsets.retention import HistoryPruner
from srm.offsets.translate import to_source, to_target
from srm.replication.accounting import Phases
from srm.replication.selector import TopicSelector
from srm.storage.warehouse import CHECKPOINT_METRICS, Warehouse

log = logging.getLogger("srm.checkpoints")
INTERNAL_GROUP_PREFIX = "__srm."  # the project's own groups are never checkpointed

Row = tuple[str, str, int, int, str]  # group, topic, partition, position, metadata


@dataclass
class Direction:
    name: str  # "forward" or "backward"
    groups: int = 0
    written: list[Checkpoint] = field(default_factory=list)
    in_force: list[Checkpoint] = field(default_factory=list)
    unchanged: int = 0
    # Partitions the flow has not copied a record of: no checkpoint, but a group offset sync sets
    # them to the end of the remote partition (0 when empty), so a consumer misses nothing later.
    not_copied: list[Checkpoint] = field(default_factory=list)


@dataclass
class PassReport:
    flow: str
    forward: Direction
    backward: Direction
    sync: SyncReport | None
    phases: Phases

    @property
    def seconds(self) -> float:
        return self.phases.total

    def summary(self) -> str:
        f, b = self.forward, self.backward
        text = (
            f"flow {self.flow} checkpoints: {f.groups} group(s), {len(f.written)} checkpoint(s) written, "
            f"{f.unchanged} unchanged; failback: {b.groups} group(s), {len(b.written)} written"
        )
        if self.sync is not None:
            text += f"; group offsets synced for {len(self.sync.synced)} group(s), {len(self.sync.skipped)} skipped"
        return f"{text} in {self.seconds:.1f} s, {self.phases.cpu:.1f} s of CPU ({self.phases})"


def require_checkpoints(flow: Flow) -> None:
    """Refuse a checkpoint pass of a flow whose checkpoints are switched off."""
    if not flow.settings.emit_checkpoints_enabled:
        raise SrmError(f"flow {flow.name} has emit.checkpoints.enabled: false; it writes no checkpoints")


class CheckpointPass:
    def __init__(self, config: SrmConfig, flow: Flow, *, sync: bool = True) -> None:
        require_checkpoints(flow)
        self.config = config
        self.flow = flow
        self.source = config.cluster(flow.source)
        self.target = config.cluster(flow.target)
        # the YAML's lists plus srm-control's, as they are when the pass starts
        stored = read_lists(self.target, flow)
        topics, groups = stored["topics"], stored["groups"]
        self.selector = TopicSelector(flow, topics.allow, topics.deny)
        s = flow.settings
        self.groups = NameFilter(s.groups + groups.allow, s.groups_exclude + groups.deny)
        self.pass_id = uuid.uuid4().hex[:12]
        self.sync = sync and flow.settings.sync_group_offsets_enabled
        self.metrics: list[dict[str, Any]] = []
        self._back_history: FlowHistory | None = None  # the flow back, when active/active prefixless
        self._admins: dict[str, Any] = {}

    def _admin(self, cluster: Any) -> Any:
        """The pass's admin client of ``cluster`` (one per cluster for the whole pass)."""
        if cluster.alias not in self._admins:
            self._admins[cluster.alias] = clients.admin_client(cluster)
        return self._admins[cluster.alias]

    def run(self) -> PassReport:
        phases = Phases()
        self._ensure_topics()
        forward_rows = self._group_rows(self._admin(self.source), self.selector.replicates)
        backward_rows = self._remote_group_rows()
        phases.lap("groups")
        # Only the partitions the groups are on, from the lowest group position on (the backward
        # direction's positions are target offsets: those partitions whole).
        positions = [((t, p), pos) for _, t, p, pos, _ in forward_rows]
        wanted = Wanted.lowest(positions)
        wanted = Wanted({**wanted.partitions, **dict.fromkeys((t, p) for _, t, p, _, _ in backward_rows)})
        topics = sorted({t for t, _ in wanted.partitions})
        tail = topic_tail(self.config, self.flow)
        phases.lap("history tail")
        current = known_topic_ids(self._admin(self.source), topics)
        phases.lap("topic ids")
        history = load_history(self.config, self.flow, wanted, current=current, tail=tail)
        log.info(
            "flow %s: sync history of %d partition(s) read: %d run(s) kept; the history topic's tail held %d row(s)",
            *(self.flow.name, len(wanted.partitions), history.runs.num_rows, tail.num_rows),
        )
        reverse = reverse_flow(self.config, self.flow)
        if reverse is not None:  # the flow back's runs are read by target offsets: whole
            self._back_history = load_history(self.config, reverse, Wanted.whole(wanted.partitions))
        phases.lap("history")
        forward = self._forward(history, forward_rows, phases)
        backward = self._backward(history, backward_rows)
        phases.lap("failback")
        sync = None
        if self.sync:
            sync = sync_group_offsets(self._admin(self.target), forward.in_force + forward.not_copied)
            phases.lap("group sync")
        self._trim_history()
        phases.lap("history trim")
        Warehouse(self.config.storage.warehouse).append(
            CHECKPOINT_METRICS, self.metrics, f"checkpoints:{self.flow.name}:{self.pass_id}", 1
        )
        phases.lap("metrics")
        report = PassReport(self.flow.name, forward, backward, sync, phases)
        log.info("%s", report.summary())
        return report

    def _trim_history(self) -> None:
        """The flow's history topic trimmed to what the warehouse holds (HistoryPruner.trim_topic);
        a failure leaves the topic for the next pass."""
        from confluent_kafka import KafkaException

        try:
            HistoryPruner(
                self.config, self.flow, source_admin=self._admin(self.source), target_admin=self._admin(self.target)
            ).trim_topic()
        except (SrmError, KafkaException) as exc:
            log.warning("flow %s: history topic not trimmed (%s); the next pass tries again", self.flow.name, exc)

    # --- topics -------------------------------------------------------------------------------
    def forward_topic(self) -> InternalTopic:
        return self._checkpoints_topic(self.flow.source, self.flow.target)

    def backward_topic(self) -> InternalTopic:
        return self._checkpoints_topic(self.flow.target, self.flow.source)

    def _checkpoints_topic(self, about: str, on: str) -> InternalTopic:
        return checkpoints_topic(self.flow, about, on)

    def _ensure_topics(self) -> None:
        for topic in (self.forward_topic(), self.backward_topic()):
            admin = self._admin(self.config.cluster(topic.cluster))
            ensure_internal_topic(admin, topic, broker_count(admin))

    # --- the two directions -------------------------------------------------------------------
    def _group_rows(self, admin: Any, wanted: Callable[[str], bool]) -> list[Row]:
        """Committed offsets of the admitted groups on the topics ``wanted`` admits."""
        names = [
            g
            for g in list_groups(admin)
            if should_replicate_group(g, self.groups) and not g.startswith(INTERNAL_GROUP_PREFIX)
        ]
        offsets = group_offsets(admin, names)
        return [
            (g, t, p, o.offset, o.metadata)
            for g, found in offsets.items()
            for (t, p), o in found.offsets.items()
            if wanted(t)
        ]

    def _remote_group_rows(self) -> list[Row]:
        """The target's groups on the flow's remote topics, keyed by the source topic."""
        rows = self._group_rows(self._admin(self.target), lambda t: self._source_topic(t) is not None)
        return [(g, str(self._source_topic(t)), p, pos, meta) for g, t, p, pos, meta in rows]

    def _source_topic(self, remote: str) -> str | None:
        """The source topic whose remote topic ``remote`` is, by name (the history tells whether the
        flow copied it)."""
        upstream = self.flow.policy.upstream_topic(remote)
        return upstream if upstream is not None and self.selector.remote(upstream) == remote else None

    def _known(self, history: FlowHistory, rows: list[Row]) -> list[Row]:
        """``rows`` of topics the flow has copied into (or, prefixless active/active, the flow back)."""
        known = {t for t, _ in history.partitions}
        if self._back_history is not None:  # a topic whose records all came from the target
            known |= {t for t, _ in self._back_history.partitions}
        unseen = {r[1] for r in rows} - known
        if unseen:  # partitions never copied, of topics that may have others that were
            known |= history_topics(self.config, self.flow, unseen)
        return [r for r in rows if r[1] in known]

    def _forward(self, history: FlowHistory, rows: list[Row], phases: Phases) -> Direction:
        direction = Direction("forward")
        rows = self._known(history, rows)
        direction.groups = len({r[0] for r in rows})
        seen = datetime.now(UTC)
        translated = self._translated(rows, history, "forward")
        fresh = [Checkpoint(g, self.selector.remote(t), p, up, down, meta) for g, t, p, up, meta, down in translated]
        phases.lap("translate")
        self._apply(direction, fresh, self.target, self.forward_topic().name)
        phases.lap("checkpoints")
        self._record(direction, translated, seen)
        direction.not_copied = self._not_copied(rows, history)
        phases.lap("ends")
        return direction

    def _not_copied(self, rows: list[Row], history: FlowHistory) -> list[Checkpoint]:
        copied = history.copied()
        if self._back_history is not None:  # translated with the flow back's runs alone (srm.offsets.merged)
            copied |= self._back_history.copied()
        rest = [r for r in rows if (r[1], r[2]) not in copied]
        if not rest:
            return []
        admin = self._admin(self.target)
        counts = partition_counts(admin, include_internal=True)
        keys = sorted(
            {(self.selector.remote(t), p) for _, t, p, _, _ in rest if p < counts.get(self.selector.remote(t), 0)}
        )
        ends = list_offsets(admin, keys, "latest")
        return [
            Checkpoint(g, self.selector.remote(t), p, up, ends[(self.selector.remote(t), p)], meta)
            for g, t, p, up, meta in rest
            if (self.selector.remote(t), p) in ends
        ]

    def _backward(self, history: FlowHistory, rows: list[Row]) -> Direction:
        direction = Direction("backward")
        rows = [r for r in rows if (r[1], r[2]) in history.progress]
        direction.groups = len({r[0] for r in rows})
        seen = datetime.now(UTC)
        translated = self._translated(rows, history, "backward")
        fresh = [Checkpoint(g, t, p, up, down, meta) for g, t, p, up, meta, down in translated]
        self._apply(direction, fresh, self.source, self.backward_topic().name)
        self._record(direction, translated, seen)
        return direction

    @staticmethod
    def _translate(rows: list[Row], history: FlowHistory, direction: str) -> list[tuple[Any, ...]]:
        """(group, topic, partition, position, metadata, translated) for rows whose partition has runs:
        the exact rule of srm.offsets.translate, each partition's runs built once (bisect over them:
        1,000 groups on a partition cost 1,000 lookups, not a scan each)."""
        translate = to_target if direction == "forward" else to_source
        out = []
        for (topic, partition), mine in _by_partition(rows).items():
            if direction == "forward":  # only the runs around the groups' positions
                runs = history.around(topic, partition, (r[3] for r in mine))
            else:
                runs = history.get(topic, partition)
            if runs.empty:
                continue
            for group, _, _, position, metadata in mine:
                out.append((group, topic, partition, position, metadata, translate(runs, position)))
        return out

    def _translated(self, rows: list[Row], history: FlowHistory, direction: str) -> list[tuple[Any, ...]]:
        """(group, topic, partition, position, metadata, translated); prefixless active/active topics with
        both flows' runs (srm.offsets.merged), which need no Spark: one position per partition and group."""
        back = self._back_history
        if back is None:
            return self._translate(rows, history, direction)
        out = []
        for group, topic, partition, position, metadata in rows:
            own, other = history.get(topic, partition), back.get(topic, partition)
            if direction == "backward":
                own, other = other, own
            merged = merged_position(own, other, position)
            if merged is not None:
                out.append((group, topic, partition, position, metadata, merged))
        return out

    def _apply(self, direction: Direction, fresh: list[Checkpoint], cluster: Any, topic: str) -> None:
        previous = read_checkpoints(cluster, topic)
        for checkpoint in fresh:
            key = (checkpoint.group, checkpoint.topic, checkpoint.partition)
            changed = monotonic(checkpoint, previous.get(key))
            if changed is None:
                direction.unchanged += 1
                direction.in_force.append(previous[key])
            else:
                direction.written.append(changed)
                direction.in_force.append(changed)
        if direction.written:
            write_checkpoints(cluster, topic, direction.written)

    # --- metrics ------------------------------------------------------------------------------
    def _record(self, direction: Direction, translated: list[tuple[Any, ...]], seen: datetime) -> None:
        if not translated:
            return
        forward = direction.name == "forward"
        here, there = (self.source, self.target) if forward else (self.target, self.source)
        written_at = datetime.now(UTC)
        written = {(c.group, c.topic, c.partition) for c in direction.written}
        in_force = {(c.group, c.topic, c.partition): c for c in direction.in_force}
        keys_here = sorted({(t if forward else self.selector.remote(t), p) for _, t, p, *_ in translated})
        keys_there = sorted({(self.selector.remote(t) if forward else t, p) for _, t, p, *_ in translated})
        ends_here = list_offsets(self._admin(here), keys_here, "latest")
        ends_there = list_offsets(self._admin(there), keys_there, "latest")
        for group, topic, partition, position, _, _ in translated:
            out_topic = self.selector.remote(topic) if forward else topic
            in_topic = topic if forward else self.selector.remote(topic)
            checkpoint = in_force[(group, out_topic, partition)]
            end_here, end_there = ends_here[(in_topic, partition)], ends_there[(out_topic, partition)]
            self.metrics.append(
                {
                    "flow": self.flow.name,
                    "pass_id": self.pass_id,
                    "direction": direction.name,
                    "group": group,
                    "topic": out_topic,
                    "partition": partition,
                    "upstream_offset": position,
                    "downstream_offset": checkpoint.downstream_offset,
                    "upstream_end": end_here,
                    "downstream_end": end_there,
                    "upstream_lag": max(0, end_here - position),
                    "downstream_lag": max(0, end_there - checkpoint.downstream_offset),
                    "written": (group, out_topic, partition) in written,
                    "latency_ms": (written_at - seen).total_seconds() * 1000,
                    "seen_at": seen,
                    "written_at": written_at,
                }
            )


def _by_partition(rows: list[Row]) -> dict[tuple[str, int], list[Row]]:
    grouped: dict[tuple[str, int], list[Row]] = {}
    for row in rows:
        grouped.setdefault((row[1], row[2]), []).append(row)
    return grouped
