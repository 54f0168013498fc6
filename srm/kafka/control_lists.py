"""srm-control's allow/deny lists: stored in Kafka, merged with the YAML's, applied while jobs run.

``srm-control topics|groups --add/--remove/--add-blacklist/--remove-blacklist`` writes the new
lists of a flow to ``srm-control.internal`` on the flow's target cluster: compacted, one
partition, key ``<source>-><target>/<kind>``, value JSON ``{"allow": [...], "deny": [...]}``.
The effective lists are the YAML's plus these. Running replication jobs keep a reader open and
poll it at every trigger, so a change applies within seconds; checkpoint passes read it at start.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Literal

from srm.config.model import Cluster, Flow
from srm.errors import ClusterUnreachableError, RecordFormatError, SrmError
from srm.kafka import clients
from srm.kafka.internal_topics import InternalTopic, ensure_internal_topic
from srm.kafka.partitions import read_to_end
from srm.kafka.topics import broker_count, existing_topics

log = logging.getLogger(__name__)
CONTROL_TOPIC = "srm-control.internal"
Kind = Literal["topics", "groups"]
RECHECK_S = 2.0  # how often a reader looks for the control topic while it does not exist


@dataclass(frozen=True)
class Lists:
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()

    def to_json(self) -> bytes:
        return json.dumps({"allow": list(self.allow), "deny": list(self.deny)}).encode()

    @classmethod
    def from_json(cls, value: bytes, where: str) -> Lists:
        try:
            data = json.loads(value)
            return cls(tuple(str(x) for x in data.get("allow", [])), tuple(str(x) for x in data.get("deny", [])))
        except (ValueError, AttributeError, TypeError) as exc:
            raise RecordFormatError(f"{where}: not a list record ({exc})") from None


def key(flow: Flow, kind: Kind) -> bytes:
    return f"{flow.source}->{flow.target}/{kind}".encode()


def control_topic(flow: Flow) -> InternalTopic:
    return InternalTopic(CONTROL_TOPIC, flow.target, "compact", flow.settings.checkpoints_topic_replication_factor)


def read_lists(target: Cluster, flow: Flow) -> dict[Kind, Lists]:
    """The stored topic and group lists of one flow, one read (empty when nothing was ever stored)."""
    reader = ControlReader(target)
    try:
        reader.poll()
        return {"topics": reader.lists(flow, "topics"), "groups": reader.lists(flow, "groups")}
    finally:
        reader.close()


def write_lists(target: Cluster, flow: Flow, kind: Kind, lists: Lists) -> None:
    admin = clients.admin_client(target)
    ensure_internal_topic(admin, control_topic(flow), broker_count(admin))
    producer = clients.producer(target, **{"enable.idempotence": True})
    producer.produce(CONTROL_TOPIC, key=key(flow, kind), value=lists.to_json(), partition=0)
    if producer.flush(30):
        raise SrmError(f"{CONTROL_TOPIC} on {target.alias} did not acknowledge the change within 30 s")


@dataclass
class ControlReader:
    """The latest lists of every flow stored on one cluster, kept current by ``poll()``."""

    cluster: Cluster
    latest: dict[bytes, Lists] = field(default_factory=dict)
    _consumer: Any = None
    _admin: Any = None
    _next_check: float = 0.0
    _first: bool = True

    def poll(self, *, recheck: bool = False) -> bool:
        """Read what was written since the last call; True if any list changed. ``recheck``: look
        for the control topic now, even within RECHECK_S of the last look."""
        if recheck:
            self._next_check = 0.0
        if self._consumer is None and not self._attach():
            return False
        changed = False
        for message in self._drain():
            if message.key() is None:
                continue
            where = f"{CONTROL_TOPIC}[0]@{message.offset()} on {self.cluster.alias}"
            try:
                lists = Lists() if message.value() is None else Lists.from_json(message.value(), where)
            except RecordFormatError as exc:
                log.error("ignored: %s", exc)
                continue
            if self.latest.get(message.key()) != lists:
                self.latest[message.key()] = lists
                changed = True
        return changed

    def lists(self, flow: Flow, kind: Kind) -> Lists:
        return self.latest.get(key(flow, kind), Lists())

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _attach(self) -> bool:
        """Start reading once the topic exists (checked at most every RECHECK_S)."""
        now = time.monotonic()
        if now < self._next_check:
            return False
        self._next_check = now + RECHECK_S
        if self._admin is None:  # one client for all looks: a flow whose lists nobody edits looks as long as it runs
            self._admin = clients.admin_client(self.cluster)
        try:
            exists = existing_topics(self._admin, [CONTROL_TOPIC])
        except ClusterUnreachableError:
            # The next look builds a new client. After the target was frozen (SIGSTOP) under a
            # running flow, a reader's long-lived client at times still got no answer once the
            # cluster answered other clients again, and the flow planned nothing for minutes.
            self._admin = None
            raise
        if not exists:
            return False
        self._admin = None
        self._consumer = clients.consumer(self.cluster, "__srm.control-reader", **{"enable.partition.eof": True})
        return True

    def _drain(self) -> list[Any]:
        if self._first:  # everything up to the end, so a job starts with the lists in force
            self._first = False
            return list(read_to_end(self._consumer, CONTROL_TOPIC, 0, keep_assigned=True))
        out = []
        while True:
            batch = self._consumer.consume(1000, 0.01)
            out += [m for m in batch if m.error() is None]
            if not batch:
                return out
