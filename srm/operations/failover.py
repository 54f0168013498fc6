"""Failover (and failback) of consumer groups from one cluster to the other.

Planned: the source is up; wait until the flow has copied everything of the groups' topics (lag
0), then translate the groups' current offsets exactly. Unplanned: the source may be gone; the
checkpoints on the target say where each group resumes. Either way offsets are written only
into target groups without members (the broker refuses others), and a dry run (the default)
writes nothing and shows the same table.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from srm.config.model import Flow, SrmConfig
from srm.errors import NotConfiguredError, SrmError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.kafka.topics import partition_counts
from srm.offsets.api import Translated, Translator
from srm.offsets.checkpoint_store import read_checkpoints
from srm.offsets.groups import alter_group_offsets, describe_groups, group_offsets, list_groups
from srm.replication.progress import read_flow_progress
from srm.replication.selector import TopicSelector

LAG_POLL_S = 1.0


@dataclass
class GroupPlan:
    group: str
    offsets: list[Translated]
    current: dict[tuple[str, int], int] = field(default_factory=dict)  # committed where it moves to, now
    outcome: str = "planned"
    cluster: str = ""  # the cluster the group moves to


def select_groups(config: SrmConfig, flow: Flow, spec: str, *, live: bool) -> list[str]:
    """Group names (comma separated) or one regex; matched against the source's groups when
    ``live``, else against the groups the checkpoints on the target know."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if names and all(re.fullmatch(r"[\w.\-]+", n) for n in names):
        return names
    pattern = _regex(spec)
    if live:
        known = list_groups(clients.admin_client(config.cluster(flow.source)))
    else:
        topic = flow.policy.checkpoints_topic(flow.source)
        known = sorted({c.group for c in read_checkpoints(config.cluster(flow.target), topic).values()})
    chosen = [g for g in known if pattern.fullmatch(g)]
    if not chosen:
        raise NotConfiguredError(f"no group matches {spec!r}")
    return chosen


def _regex(spec: str) -> re.Pattern[str]:
    try:
        return re.compile(spec)
    except re.error as exc:
        raise SrmError(f"groups {spec!r} is neither a list of group names nor a valid regex: {exc}") from None


def partition_lag(config: SrmConfig, flow: Flow, topics: set[str]) -> dict[tuple[str, int], int]:
    """Per source partition of ``topics``: records the flow has not copied yet (source end - progress)."""
    source_admin = clients.admin_client(config.cluster(flow.source))
    counts = partition_counts(source_admin, include_internal=True)
    keys = [(t, p) for t in sorted(topics) for p in range(counts.get(t, 0))]
    ends = list_offsets(source_admin, keys, "latest")
    done = read_flow_progress(config.cluster(flow.target), flow, keys)
    return {k: max(0, e - (done[k].next_offset if k in done else 0)) for k, e in ends.items()}


def wait_for_zero_lag(config: SrmConfig, flow: Flow, topics: set[str], timeout_s: float) -> None:
    """Until the flow's progress on the target equals the source's end for every partition of ``topics``."""
    deadline = time.monotonic() + timeout_s
    while True:
        lag = {k: v for k, v in partition_lag(config, flow, topics).items() if v > 0}
        if not lag:
            return
        if time.monotonic() > deadline:
            worst = ", ".join(f"{t}[{p}] {n}" for (t, p), n in sorted(lag.items())[:5])
            raise SrmError(
                f"flow {flow.name} still lags after {timeout_s:.0f} s ({worst}): is the replication running?"
            )
        time.sleep(LAG_POLL_S)


def plan(config: SrmConfig, flow: Flow, groups: str, mode: str, timeout_s: float = 300.0) -> list[GroupPlan]:
    """Where each group resumes on the target, and what it has committed there now."""
    planned = mode == "planned"
    names = select_groups(config, flow, groups, live=planned)
    if planned:
        found = group_offsets(clients.admin_client(config.cluster(flow.source)), names)
        topics = {t for g in names for t, _ in found[g].offsets if TopicSelector(flow).replicates(t)}
        wait_for_zero_lag(config, flow, topics, timeout_s)
    # After the wait: the history read now covers everything the groups read.
    translated = Translator(config, flow).groups(names, live=planned)
    plans = [GroupPlan(g, translated[g]) for g in names]
    return _with_current(config, flow.target, plans)


def plan_failback(config: SrmConfig, flow: Flow, groups: str) -> list[GroupPlan]:
    """Groups that consumed the flow's remote topics on its target, translated back to the source."""
    names = [n.strip() for n in groups.split(",") if n.strip()]
    if not names or not all(re.fullmatch(r"[\w.\-]+", n) for n in names):
        pattern = _regex(groups)
        names = [g for g in list_groups(clients.admin_client(config.cluster(flow.target))) if pattern.fullmatch(g)]
        if not names:
            raise NotConfiguredError(f"no group on {flow.target} matches {groups!r}")
    found = Translator(config, flow).groups(names, "backward")
    plans = [GroupPlan(g, found[g]) for g in names]
    return _with_current(config, flow.source, plans)


def _with_current(config: SrmConfig, cluster: str, plans: list[GroupPlan]) -> list[GroupPlan]:
    current = group_offsets(clients.admin_client(config.cluster(cluster)), [p.group for p in plans])
    for entry in plans:
        entry.cluster = cluster
        entry.current = {k: v.offset for k, v in current[entry.group].offsets.items()}
    return plans


def apply(config: SrmConfig, plans: list[GroupPlan]) -> None:
    """Write each plan's offsets into its group on the cluster it moves to, if nobody consumes with it there."""
    for cluster in sorted({p.cluster for p in plans}):
        admin = clients.admin_client(config.cluster(cluster))
        mine = [p for p in plans if p.cluster == cluster]
        states = describe_groups(admin, [p.group for p in mine])
        for entry in mine:
            _apply_one(admin, entry, states[entry.group])


def _apply_one(admin: Any, entry: GroupPlan, state: Any) -> None:
    if not state.writable:
        entry.outcome = f"refused: active on {entry.cluster} ({state.members} member(s), state {state.state})"
        return
    refused = alter_group_offsets(admin, entry.group, {(t.topic, t.partition): t.offset for t in entry.offsets})
    entry.outcome = f"refused by the broker: {refused}" if refused else "applied"


def table(plans: list[GroupPlan]) -> list[str]:
    """One row per group and partition: where it was, where it resumes, what it has now."""
    from srm.console import table_lines

    rows = [
        (
            entry.group,
            f"{t.from_topic}[{t.partition}]@{t.from_offset}",
            f"{t.topic}[{t.partition}]@{t.offset}",
            "-" if (now := entry.current.get((t.topic, t.partition))) is None else now,
            entry.outcome,
        )
        for entry in plans
        for t in entry.offsets
    ]
    return table_lines(("group", "from", "to", "now on target", "outcome"), rows, right=("now on target",))
