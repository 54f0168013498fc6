"""Remote topics on the target: created before data flows, grown with the source, never misused.

A remote topic is created with the source's partition count and copied configs (see
:mod:`srm.mm2.topic_configs`), its replication factor capped at the target's broker count. When the
source grows, a remote topic this flow writes to grows too. A topic that already exists on the
target, that this flow has never written to, and that has fewer partitions or another
cleanup.policy than the source stops the flow: partition p is only ever written to partition p,
and compacting a topic that should keep everything (or the reverse) would lose data.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from srm.config.model import Cluster, Flow
from srm.errors import DataLossError, TopicConflictError
from srm.kafka.internal_topics import capped_replication_factor
from srm.kafka.partitions import await_served
from srm.kafka.topics import (
    NewTopicSpec,
    cluster_metadata,
    create_partitions,
    describe_configs_of,
    describe_topic_configs,
    ensure_topics,
)
from srm.mm2.topic_configs import configs_to_copy
from srm.replication.progress import Progress, read_flow_progress

log = logging.getLogger(__name__)


Key = tuple[str, int]
# What is done about remote topics deleted after the flow copied into them (source partition ->
# its committed progress): raise, or forget what the flow knew of them (their sync history) and
# return, after which they are created again and the copy goes on from the committed progress.
GoneHandler = Callable[[dict[Key, Progress]], None]


class RemoteTopics:
    """``gone``: what the flow's run does about remote topics deleted under it (see
    :func:`deleted_error`); without one (the maintenance DAG), such a topic is left for the flow's
    next run to decide about, not created again."""

    def __init__(
        self, flow: Flow, target: Cluster, source_admin: Any, target_admin: Any, gone: GoneHandler | None = None
    ) -> None:
        self.flow = flow
        self.target = target
        self.source_admin = source_admin
        self.target_admin = target_admin
        self.gone = gone
        self.known: dict[str, int] = {}  # remote topic -> partitions we know it has
        self.listed: set[str] | None = None  # remote topics srm-meta lists for the flow, read once per ensure()
        self.unserved: set[Key] = set()  # remote partitions created, not yet held by their leaders

    def ensure(self, wanted: dict[str, int]) -> None:
        """Make the remote topic of every source topic in ``wanted`` (name -> partitions) ready: it
        exists, has the partitions, and the leaders of those created here hold them (see
        :func:`srm.kafka.partitions.await_served`: a write in between is refused for good)."""
        self._ensure(wanted, early=False)
        self._await_served()

    def prepare(self, wanted: dict[str, int]) -> None:
        """As :meth:`ensure`, ahead of the lease that copies ``wanted``; when one of them was deleted
        under the flow, nothing is made: that lease's ensure() does what the run does about it."""
        self._ensure(wanted, early=True)
        self._await_served()

    def _await_served(self) -> None:
        if self.unserved:
            await_served(self.target_admin, sorted(self.unserved))  # ClusterUnreachableError: the next call waits again
            self.unserved.clear()

    def ready(self, wanted: dict[str, int]) -> bool:
        """Is every remote topic of ``wanted`` (name -> partitions) known to be ready (no call)?"""
        return not self.unserved and not self._unknown(wanted)

    def _unknown(self, wanted: dict[str, int]) -> dict[str, int]:
        """Those of ``wanted`` whose remote topic is not known to have their partitions."""
        return {t: n for t, n in wanted.items() if self.known.get(self._remote(t), -1) < n}

    def _ensure(self, wanted: dict[str, int], early: bool) -> None:
        todo = self._unknown(wanted)
        if not todo:
            return
        self.listed = None
        metadata = cluster_metadata(self.target_admin)
        target_counts = {name: len(t.partitions) for name, t in metadata.topics.items()}
        existing = [(t, p) for t in todo for p in range(target_counts.get(self._remote(t), 0))]
        missing = [(t, p) for t, n in todo.items() if self._remote(t) not in target_counts for p in range(n)]
        progress = read_flow_progress(self.target, self.flow, existing + missing, self.target_admin)
        ours = {self._remote(topic) for topic, _ in progress if self._remote(topic) in target_counts}
        gone = {tp: progress[tp] for tp in missing if tp in progress}
        if gone and early:
            return
        if gone:
            if self.gone is None:
                names = sorted({self._remote(t) for t, _ in gone})
                log.warning(
                    "flow %s: remote topic(s) %s were deleted from %s after the flow copied into them; left for "
                    "the flow's next run, which does what its on_data_loss says",
                    *(self.flow.name, ", ".join(names), self.flow.target),
                )
                todo = {t: n for t, n in todo.items() if self._remote(t) not in names}
            else:
                self.gone(gone)
        self._create({t: n for t, n in todo.items() if self._remote(t) not in target_counts}, len(metadata.brokers))
        for topic, partitions in todo.items():
            remote = self._remote(topic)
            found = target_counts.get(remote)
            if found is not None:
                self._check(topic, remote, partitions, found, remote in ours)
            self.known[remote] = max(partitions, found or 0)

    def forget(self, topic: str) -> None:
        """The remote topic of ``topic`` is checked again at the next ensure() (it may have been deleted)."""
        remote = self._remote(topic)
        self.known.pop(remote, None)
        self.unserved = {(t, p) for t, p in self.unserved if t != remote}

    def _listed(self) -> set[str]:
        from srm.maintenance.meta import listed_remote_topics

        if self.listed is None:
            self.listed = listed_remote_topics(self.target, self.flow)
        return self.listed

    def _remote(self, topic: str) -> str:
        return self.flow.policy.format_remote_topic(self.flow.source, topic)

    def _create(self, missing: dict[str, int], brokers: int) -> None:
        """Create the remote topics of ``missing`` (source topic -> partitions) with the source
        topics' configs, in as few requests as the topics allow (srm.kafka.topics.BATCH to a request)."""
        if not missing:
            return
        s = self.flow.settings
        values = describe_configs_of(self.source_admin, list(missing))
        specs = [
            NewTopicSpec(
                remote,
                partitions,
                capped_replication_factor(s.replication_factor, brokers, remote),
                configs_to_copy(values[topic], s.config_properties_exclude, s.use_defaults_from),
            )
            for topic, partitions in missing.items()
            for remote in [self._remote(topic)]
        ]
        created = ensure_topics(self.target_admin, specs)
        self.unserved.update((t.name, p) for t in specs if t.name in created for p in range(t.partitions))
        for spec in specs:
            if spec.name in created:
                shown = ", ".join(f"{k}={v}" for k, v in sorted(spec.config.items())) or "no topic-level configs"
                log.info(
                    "created remote topic %s on %s: %d partition(s), replication factor %d, %s",
                    *(spec.name, self.flow.target, spec.partitions, spec.replication_factor, shown),
                )

    def _check(self, topic: str, remote: str, partitions: int, found: int, ours: bool) -> None:
        # ours: the flow has copied into it, or srm-meta lists it (the maintenance DAG created it)
        ours = ours or remote in self._listed()
        if found < partitions:
            if not ours:
                raise self._conflict(remote, "partition count", f"at least {partitions} (as {topic!r})", str(found))
            create_partitions(self.target_admin, remote, partitions)
            self.unserved.update((remote, p) for p in range(found, partitions))
            log.info("grew remote topic %s on %s from %d to %d partitions", remote, self.flow.target, found, partitions)
        if ours:
            return
        wanted = describe_topic_configs(self.source_admin, topic).get("cleanup.policy")
        existing = describe_topic_configs(self.target_admin, remote).get("cleanup.policy")
        if _policies(wanted) != _policies(existing):
            raise self._conflict(remote, "cleanup.policy", f"{wanted} (as {topic!r})", str(existing))

    def _conflict(self, remote: str, setting: str, expected: str, found: str) -> TopicConflictError:
        return TopicConflictError(
            f"flow {self.flow.name}: topic {remote!r} already exists on {self.flow.target} with {setting} {found}, "
            f"expected {expected}; it was left unchanged and nothing was copied. Delete or fix it, or exclude "
            f"the source topic (topics.exclude)"
        )


def _policies(value: str | None) -> set[str]:
    return {p.strip() for p in (value or "delete").split(",")}


def deleted_error(flow: Flow, gone: dict[Key, Progress]) -> DataLossError:
    """Remote topics deleted after the flow copied into them, under ``on_data_loss: fail``."""
    return DataLossError(
        f"flow {flow.name} stopped (on_data_loss: fail): {describe_gone(flow, gone)} deleted from {flow.target} "
        f"after the flow copied into them; what it copied there is lost on {flow.target}. Set on_data_loss: "
        "continue for this flow to create them again and copy on from the committed progress (the records "
        "before it are not copied again), or take these topics out of the flow"
    )


def describe_gone(flow: Flow, gone: dict[Key, Progress]) -> str:
    """'remote topic 'a.t' (of 't', copied up to offset(s) [0] 120, [1] 80)' for each topic of ``gone``."""
    described = []
    for topic in sorted({t for t, _ in gone}):
        offsets = ", ".join(f"[{p}] {gone[(t, p)].next_offset}" for t, p in sorted(gone) if t == topic)
        remote = flow.policy.format_remote_topic(flow.source, topic)
        described.append(f"remote topic {remote!r} (of {topic!r}, copied up to offset(s) {offsets})")
    return "; ".join(described)
