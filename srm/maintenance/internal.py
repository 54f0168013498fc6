"""Every internal topic a flow uses, created or checked (never altered)."""

from __future__ import annotations

from srm.config.model import Flow, SrmConfig
from srm.kafka import clients
from srm.kafka.internal_topics import InternalTopic, checkpoints_topic, ensure_internal_topic, flow_internal_topics
from srm.kafka.topics import broker_count
from srm.maintenance.heartbeats import heartbeats_topic

META_TOPIC = "srm-meta.internal"


def meta_topic(flow: Flow) -> InternalTopic:
    return InternalTopic(META_TOPIC, flow.target, "compact", flow.settings.checkpoints_topic_replication_factor)


def flow_topics(flow: Flow) -> list[InternalTopic]:
    """History and MM2 offset syncs, checkpoints both ways, heartbeats on both sides, srm-meta."""
    return [
        *flow_internal_topics(flow),
        checkpoints_topic(flow, flow.source, flow.target),
        checkpoints_topic(flow, flow.target, flow.source),
        heartbeats_topic(flow, flow.source),
        heartbeats_topic(flow, flow.target),
        meta_topic(flow),
    ]


def validate_internal_topics(config: SrmConfig, flow: Flow) -> list[str]:
    """Create missing internal topics, check existing ones; one line per topic for the task log.

    Raises TopicConflictError (topic, setting, expected, found) for a wrongly configured topic,
    which is left as it is.
    """
    lines = []
    for topic in flow_topics(flow):
        admin = clients.admin_client(config.cluster(topic.cluster))
        created = ensure_internal_topic(admin, topic, broker_count(admin))
        lines.append(f"{topic.name} on {topic.cluster}: {'created' if created else 'ok'} ({topic.cleanup_policy})")
    return lines
