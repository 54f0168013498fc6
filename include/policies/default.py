"""DefaultReplicationPolicy: remote topics carry the source alias as a prefix (``us-west.orders``)."""

from __future__ import annotations

from include.policies.base import ReplicationPolicy


def java_split(text: str, separator: str) -> list[str]:
    """Split like Java's ``String.split(Pattern.quote(sep))``, which MM2 relies on.

    Java drops trailing empty pieces but keeps a leading one: ``"foo."`` -> ``["foo"]``,
    ``".b"`` -> ``["", "b"]``, ``""`` -> ``[""]``.
    """
    pieces = text.split(separator)
    while len(pieces) > 1 and pieces[-1] == "":
        pieces.pop()
    if pieces == [""] and text:
        return []
    return pieces


class DefaultReplicationPolicy(ReplicationPolicy):
    """Prefixes the source cluster alias: ``format_remote_topic("us-west", "t") == "us-west.t"``."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return source_alias + self.separator + topic

    def topic_source(self, topic: str) -> str | None:
        pieces = java_split(topic, self.separator)
        if len(pieces) < 2:
            return None
        return pieces[0]
