"""IdentityReplicationPolicy: remote topics keep their names (prefixless replication).

Heartbeats are the exception: they are still prefixed (``us-west.heartbeats``) so hop counting
and flow monitoring keep working. Because data topics carry no origin in their name, the policy
cannot tell a replicated topic from a local one; cycles are prevented at configuration time
(``srm-control validate`` rejects identity flows that form a loop).
"""

from __future__ import annotations

from include.policies.default import DefaultReplicationPolicy


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        if self._looks_like_heartbeats(topic):
            return super().format_remote_topic(source_alias, topic)
        return topic

    def topic_source(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return super().topic_source(topic)
        return self._source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        if self._looks_like_heartbeats(topic):
            return super().upstream_topic(topic)
        return topic

    def _looks_like_heartbeats(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())
