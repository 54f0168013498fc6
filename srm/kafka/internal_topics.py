"""Internal topics of a flow: names (MM2's where MM2 has the concept), settings, creation, checks.

An existing internal topic with the wrong cleanup.policy, partition count or replication factor
is never altered: the check raises TopicConflictError naming topic, setting, expected and found.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from typing import Any

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from srm.config.model import Flow
from srm.errors import InvariantError, SrmError, TopicConflictError
from srm.kafka.topics import describe_topic_configs, ensure_topic, partition_counts, topic_replication_factors

log = logging.getLogger(__name__)
VISIBLE_WAIT_S = 10.0  # a topic another client just created: until the brokers answer for it
VISIBLE_POLL_S = 0.1

# The exact sync history is the durable buffer between a transaction and the warehouse table
# that keeps the whole history; a week covers any outage of the warehouse ingest.
HISTORY_RETENTION_MS = 7 * 24 * 3600 * 1000
HISTORY_SEGMENT_MS = 2 * 60 * 1000


@dataclass(frozen=True)
class InternalTopic:
    name: str
    cluster: str  # alias
    cleanup_policy: str
    replication_factor: int
    partitions: int = 1
    config: dict[str, str] = field(default_factory=dict)


def history_topic_name(flow: Flow) -> str:
    """``srm-offset-syncs.<source>.internal`` on the target, shaped by the policy's separators."""
    return "srm" + flow.policy.offset_syncs_topic(flow.source).removeprefix("mm2")


def history_topic(flow: Flow) -> InternalTopic:
    """The exact sync history on the target. The prune deletes its records once they are in the
    warehouse (srm.offsets.retention); a broker removes a segment from disk only once all of it lies
    below the topic's log-start offset, and with Kafka's default segments (1 GiB, 7 days) that took
    days: a segment every 2 minutes keeps the topic on disk to what is not trimmed yet and at most
    a segment more (with 10-minute segments it swung between 10 and 30 minutes of records)."""
    return InternalTopic(
        name=history_topic_name(flow),
        cluster=flow.target,
        cleanup_policy="delete",
        replication_factor=flow.settings.offset_syncs_topic_replication_factor,
        config={"retention.ms": str(HISTORY_RETENTION_MS), "segment.ms": str(HISTORY_SEGMENT_MS)},
    )


def progress_topic_name(flow: Flow) -> str:
    """``srm-offsets.<source>.internal`` on the target, shaped by the policy's separators."""
    return history_topic_name(flow).replace("srm-offset-syncs", "srm-offsets", 1)


def progress_topic(flow: Flow) -> InternalTopic:
    """The copy's progress (srm.replication.progress): compacted hard, so reading it whole at a
    copier's start stays quick however often transactions commit (a minute of records at most
    waits for the cleaner)."""
    return InternalTopic(
        name=progress_topic_name(flow),
        cluster=flow.target,
        cleanup_policy="compact",
        replication_factor=flow.settings.offset_syncs_topic_replication_factor,
        config={"segment.ms": "60000", "min.cleanable.dirty.ratio": "0.01"},
    )


def mm2_offset_syncs_topic(flow: Flow) -> InternalTopic:
    """MM2's ``mm2-offset-syncs.<target>.internal`` on the source (or ``.<source>.`` on the target)."""
    on_target = flow.settings.offset_syncs_topic_location == "target"
    return InternalTopic(
        name=flow.policy.offset_syncs_topic(flow.source if on_target else flow.target),
        cluster=flow.target if on_target else flow.source,
        cleanup_policy="compact",
        replication_factor=flow.settings.offset_syncs_topic_replication_factor,
    )


# A checkpoint pass writes every checkpoint that moved (200 groups on 64 partitions: 12,800 records a
# minute) and reads the whole topic first (monotonicity across restarts). With Kafka's defaults the
# active segment is compacted only after 7 days or 1 GiB, so that read grew with every pass; a
# segment rolled every minute (the passes' default interval) keeps it to the latest checkpoints
# plus a pass or two: with 10 minutes it went up and down by ten passes' records, and so did the
# passes' time. The cleaner's work is the same records once more a minute.
CHECKPOINTS_SEGMENT_MS = 60 * 1000


def checkpoints_topic(flow: Flow, about: str, on: str) -> InternalTopic:
    """MM2's ``<about>.checkpoints.internal`` on cluster ``on``: the checkpoints of ``about``'s groups."""
    return InternalTopic(
        flow.policy.checkpoints_topic(about),
        on,
        "compact",
        flow.settings.checkpoints_topic_replication_factor,
        config={"segment.ms": str(CHECKPOINTS_SEGMENT_MS), "min.cleanable.dirty.ratio": "0.1"},
    )


def status_topic_name(flow: Flow) -> str:
    """``srm-status.<source>.internal`` on the target, shaped by the policy's separators."""
    return history_topic_name(flow).replace("srm-offset-syncs", "srm-status", 1)


def status_topic(flow: Flow) -> InternalTopic:
    """What each partition's current lease copied so far (srm.replication.status), for the
    monitoring service: compacted like the progress, one record per partition that copied."""
    return replace(progress_topic(flow), name=status_topic_name(flow))


OWNERS_TOPIC = "srm-owners.internal"


def owners_topic(flow: Flow) -> InternalTopic:
    """Which run owns each flow into a cluster (srm.replication.ownership), on the target."""
    return InternalTopic(
        OWNERS_TOPIC,
        flow.target,
        "compact",
        flow.settings.checkpoints_topic_replication_factor,
        config={"segment.ms": str(3600 * 1000)},  # compact superseded leases hourly, not weekly
    )


def flow_internal_topics(flow: Flow) -> list[InternalTopic]:
    """The internal topics the replication job of ``flow`` writes to."""
    topics = [history_topic(flow), progress_topic(flow), status_topic(flow), owners_topic(flow)]
    if flow.settings.emit_offset_syncs_enabled:
        topics.append(mm2_offset_syncs_topic(flow))
    return topics


def ensure_internal_topic(admin: Any, topic: InternalTopic, broker_count: int) -> bool:
    """Create ``topic`` if missing, else check it; True if it was created."""
    replication = capped_replication_factor(topic.replication_factor, broker_count, topic.name)
    config = {"cleanup.policy": topic.cleanup_policy, **topic.config}
    if ensure_topic(admin, topic.name, topic.partitions, replication, config):
        log.info(
            "created internal topic %s on %s (%s, %d partition(s))",
            topic.name,
            topic.cluster,
            topic.cleanup_policy,
            topic.partitions,
        )
        return True
    check_internal_topic(admin, topic, replication)
    return False


def check_internal_topic(admin: Any, topic: InternalTopic, replication: int) -> None:
    found_policy, found_partitions, found_replication = _settings_of(admin, topic.name)
    checks = [
        ("cleanup.policy", topic.cleanup_policy, found_policy),
        ("partitions", topic.partitions, found_partitions),
        ("replication factor", replication, found_replication),
    ]
    for setting, expected, found in checks:
        if found != expected:
            raise TopicConflictError(
                f"internal topic {topic.name!r} on {topic.cluster}: {setting} is {found}, expected {expected}; "
                "it was left unchanged: fix or delete it by hand (it holds no user data of its own)"
            )


class _NotYetVisible(Exception):
    pass


def _settings_of(admin: Any, name: str) -> tuple[str | None, int | None, int | None]:
    """(cleanup.policy, partitions, replication factor) of an existing topic.

    Another client may have created it an instant ago (the flows of several sources into one target
    start at the same moment and share ``srm-owners.internal``): until every broker has it, the
    metadata leaves it out and describing its configs says UNKNOWN_TOPIC_OR_PART. That lasts
    milliseconds; VISIBLE_WAIT_S bounds the wait, then the check says what it found."""

    def read() -> tuple[str | None, int | None, int | None]:
        partitions = partition_counts(admin, include_internal=True).get(name)
        if partitions is None:
            raise _NotYetVisible(name)
        try:
            policy = describe_topic_configs(admin, name).get("cleanup.policy")
        except SrmError as exc:
            if "Unknown topic or partition" in str(exc):
                raise _NotYetVisible(name) from exc
            raise
        return policy, partitions, topic_replication_factors(admin, [name]).get(name)

    try:
        for attempt in Retrying(
            retry=retry_if_exception_type(_NotYetVisible),
            stop=stop_after_delay(VISIBLE_WAIT_S),
            wait=wait_fixed(VISIBLE_POLL_S),
            reraise=True,
        ):
            with attempt:
                return read()
    except _NotYetVisible as exc:
        if exc.__cause__ is not None:
            raise exc.__cause__ from None
        raise SrmError(
            f"topic {name!r} exists (creating it was refused as a duplicate) but the cluster's metadata has not "
            f"shown it within {VISIBLE_WAIT_S:.0f} s"
        ) from None
    raise InvariantError("tenacity's Retrying ends with a result or an exception")


def capped_replication_factor(wanted: int, broker_count: int, topic: str) -> int:
    """``wanted`` or, on a cluster with fewer brokers, the broker count (with a warning)."""
    if broker_count and wanted > broker_count:
        log.warning(
            "topic %s: replication factor %d capped at %d, the number of brokers of the cluster",
            topic,
            wanted,
            broker_count,
        )
        return broker_count
    return wanted
