"""The flow's topic predicate with its filters built once (and rebuilt when the lists change)."""

from __future__ import annotations

from srm.config.model import Flow
from srm.filters import NameFilter, should_replicate_topic


class TopicSelector:
    def __init__(self, flow: Flow, extra_include: tuple[str, ...] = (), extra_exclude: tuple[str, ...] = ()) -> None:
        s = flow.settings
        self.flow = flow
        self.filter = NameFilter(s.topics + extra_include, s.topics_exclude + extra_exclude)

    def replicates(self, topic: str) -> bool:
        return should_replicate_topic(
            topic,
            target=self.flow.target,
            policy=self.flow.policy,
            topics=self.filter,
            heartbeats_replication_enabled=self.flow.settings.heartbeats_replication_enabled,
        )

    def remote(self, topic: str) -> str:
        return self.flow.policy.format_remote_topic(self.flow.source, topic)
