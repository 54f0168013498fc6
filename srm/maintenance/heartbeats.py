"""Heartbeats, MM2's way: ``Heartbeat(A, B, now)`` written to ``heartbeats`` on B for each ordered pair.

A flow A->B replicates A's ``heartbeats`` topic (which pairs X->A write to) to ``A.heartbeats`` on
B, like any topic. The newest heartbeat in ``A.heartbeats`` on B says how long ago the flow last
carried a record end to end: that is what the stall sensor checks.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from srm.config.model import Cluster, Flow, SrmConfig
from srm.errors import RecordFormatError, SrmError
from srm.kafka import clients
from srm.kafka.internal_topics import InternalTopic, ensure_internal_topic
from srm.kafka.partitions import assign_partitions, list_offsets
from srm.kafka.topics import broker_count, partition_counts
from srm.mm2.records import Heartbeat

log = logging.getLogger(__name__)


def heartbeat_pairs(config: SrmConfig, flow: Flow) -> list[tuple[str, str]]:
    """The ordered pairs whose heartbeats this flow's DAG emits.

    MM2 emits for every ordered pair of clusters. Here each flow emits its own pair (A, B), and the
    reverse pair (B, A) too when no flow B->A exists to emit it: A's ``heartbeats`` topic must have
    records for A->B to carry. A pair is emitted by exactly one flow.
    """
    if not flow.settings.emit_heartbeats_enabled:
        return []
    pairs = [(flow.source, flow.target)]
    reverse = [f for f in config.enabled_flows() if (f.source, f.target) == (flow.target, flow.source)]
    if not reverse:
        pairs.append((flow.target, flow.source))
    return pairs


def heartbeats_topic(flow: Flow, cluster: str) -> InternalTopic:
    return InternalTopic(
        flow.policy.heartbeats_topic(), cluster, "compact", flow.settings.heartbeats_topic_replication_factor
    )


def emit(config: SrmConfig, flow: Flow, duration_s: float) -> int:
    """Emit the flow's heartbeats every ``emit.heartbeats.interval.seconds`` for ``duration_s``; returns how many."""
    pairs = heartbeat_pairs(config, flow)
    producers: dict[str, Any] = {}
    for _, target in pairs:
        cluster = config.cluster(target)
        admin = clients.admin_client(cluster)
        ensure_internal_topic(admin, heartbeats_topic(flow, target), broker_count(admin))
        producers[target] = clients.producer(cluster, **{"enable.idempotence": True})
    try:
        return _emit_until(flow, pairs, producers, time.monotonic() + duration_s)
    finally:
        for producer in producers.values():
            clients.close_producer(producer)


def _emit_until(flow: Flow, pairs: list[tuple[str, str]], producers: dict[str, Any], deadline: float) -> int:
    interval = flow.settings.emit_heartbeats_interval_seconds
    sent = 0
    while True:
        now = int(time.time() * 1000)
        for source, target in pairs:
            heartbeat = Heartbeat(source, target, now)
            producers[target].produce(flow.policy.heartbeats_topic(), **heartbeat.as_produce_kwargs())
            sent += 1
        for producer in producers.values():
            producer.poll(0)
        if time.monotonic() + interval > deadline:
            break
        time.sleep(interval)
    for target, producer in producers.items():
        if producer.flush(30):
            raise SrmError(f"heartbeats to {target} were not acknowledged within 30 s")
    return sent


@dataclass(frozen=True)
class Freshness:
    topic: str
    newest_ms: int | None  # timestamp of the newest replicated heartbeat, None if there is none
    now_ms: int

    @property
    def age_s(self) -> float | None:
        return None if self.newest_ms is None else max(0.0, (self.now_ms - self.newest_ms) / 1000)


def replicated_heartbeats(flow: Flow) -> str:
    """``A.heartbeats`` on B: A's heartbeats as the flow copies them."""
    return flow.policy.format_remote_topic(flow.source, flow.policy.heartbeats_topic())


def freshness(target: Cluster, flow: Flow, admin: Any | None = None) -> Freshness:
    """How old the newest heartbeat in ``A.heartbeats`` on B is (reads the last record of each
    partition). ``admin``: the caller's admin client of ``target``, else one of its own."""
    from confluent_kafka import TopicPartition

    topic = replicated_heartbeats(flow)
    now = int(time.time() * 1000)
    admin = admin or clients.admin_client(target)
    partitions = partition_counts(admin, include_internal=True).get(topic, 0)
    if not partitions:
        return Freshness(topic, None, now)
    ends = list_offsets(admin, [(topic, p) for p in range(partitions)], "latest")
    consumer = clients.reader(target, "__srm.heartbeat-check")
    newest: int | None = None
    try:
        for (_, p), end in ends.items():
            if end > 0:
                for beat in _last_heartbeats(consumer, TopicPartition(topic, p, max(0, end - 20))):
                    newest = beat.timestamp if newest is None else max(newest, beat.timestamp)
    finally:
        consumer.close()
    return Freshness(topic, newest, now)


def _last_heartbeats(consumer: Any, start: Any) -> list[Heartbeat]:
    """The heartbeats from ``start`` to the end of its partition (transaction markers are skipped)."""
    assign_partitions(consumer, [start])
    beats: list[Heartbeat] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        for message in consumer.consume(100, 0.05):
            error = message.error()
            if error is not None:
                if error.name() == "_PARTITION_EOF":
                    return beats
                continue
            try:
                beats.append(Heartbeat.from_message(message))
            except RecordFormatError as exc:
                log.warning("ignoring %s", exc)
    return beats
