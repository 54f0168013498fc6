"""The flow's topic predicate with its filters built once (and rebuilt when the lists change)."""

from __future__ import annotations

import functools

from srm.config.filters import NameFilter, should_replicate_topic
from srm.config.model import Flow

SELECTOR_CACHE = 1 << 16  # topic names whose answer is kept


class TopicSelector:
    def __init__(self, flow: Flow, extra_include: tuple[str, ...] = (), extra_exclude: tuple[str, ...] = ()) -> None:
        s = flow.settings
        self.flow = flow
        self.filter = NameFilter(s.topics + extra_include, s.topics_exclude + extra_exclude)
        # Asked for every topic of the source each second while a lease runs (srm.replication.lease):
        # each name's answer once, for as long as the lists stand (a new selector then).
        self.replicates = functools.lru_cache(maxsize=SELECTOR_CACHE)(self._replicates)

    def _replicates(self, topic: str) -> bool:
        return should_replicate_topic(
            topic,
            target=self.flow.target,
            policy=self.flow.policy,
            topics=self.filter,
            heartbeats_replication_enabled=self.flow.settings.heartbeats_replication_enabled,
        )

    def remote(self, topic: str) -> str:
        return self.flow.policy.format_remote_topic(self.flow.source, topic)
