"""Which topics and consumer groups a flow replicates: two pure predicates with MM2's semantics.

Topic rule (MM2 ``MirrorSourceConnector.shouldReplicateTopic``): the topic passes the allow/deny
filter, or is a heartbeats topic while ``heartbeats.replication.enabled``; and it is not internal;
and it is not a cycle (it did not originate on, or pass through, the target). Group rule
(``DefaultGroupFilter``): the group passes the allow/deny filter; whether it has offsets on
replicated topics is checked where offsets are read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from include.policies import ReplicationPolicy


@dataclass(frozen=True)
class NameFilter:
    """Allow and deny regex lists, full-string match, deny wins (MM2's DefaultTopicFilter)."""

    include: tuple[str, ...]
    exclude: tuple[str, ...] = ()
    _include: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _exclude: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_include", _union(self.include))
        object.__setattr__(self, "_exclude", _union(self.exclude))

    def admits(self, name: str) -> bool:
        if self._include is None or not self._include.fullmatch(name):
            return False
        return self._exclude is None or not self._exclude.fullmatch(name)


def _union(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    # An empty list matches nothing (MM2: topics="" replicates no topic).
    return re.compile("|".join(f"(?:{p})" for p in patterns)) if patterns else None


def is_cycle(topic: str, target: str, policy: ReplicationPolicy) -> bool:
    """True if ``topic`` came from ``target`` at some hop: replicating it back would loop.

    Walks ``topic_source``/``upstream_topic`` up the chain and stops when there is no upstream or
    the upstream is the same name (identity policies, which cannot detect cycles by name).
    """
    current = topic
    while True:
        source = policy.topic_source(current)
        if source is None:
            return False
        if source == target:
            return True
        upstream = policy.upstream_topic(current)
        if upstream is None or upstream == current:
            return False
        current = upstream


def should_replicate_topic(
    topic: str,
    *,
    target: str,
    policy: ReplicationPolicy,
    topics: NameFilter,
    heartbeats_replication_enabled: bool = True,
) -> bool:
    """The one predicate for "does flow (-> ``target``) copy source topic ``topic``"."""
    wanted = topics.admits(topic) or (heartbeats_replication_enabled and policy.is_heartbeats_topic(topic))
    return wanted and not policy.is_internal_topic(topic) and not is_cycle(topic, target, policy)


def should_replicate_group(group: str, groups: NameFilter) -> bool:
    """The one predicate for "does the flow checkpoint consumer group ``group``"."""
    return groups.admits(group)
