"""The least-privilege ACLs of a flow's principals: what the replicator does on each cluster.

Derived from what the code calls (admin requests, consumers, transactional producers), with Kafka's
implications in mind: READ, WRITE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
an idempotent or transactional producer needs no IDEMPOTENT_WRITE on the cluster when it may write
a topic (Kafka >= 2.8). Internal topics need CREATE even when they exist: CreateTopics is sent each
time and a broker answers TOPIC_AUTHORIZATION_FAILED rather than TOPIC_ALREADY_EXISTS without it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from srm.config.model import Flow
from srm.kafka.control_lists import CONTROL_TOPIC
from srm.kafka.internal_topics import history_topic_name
from srm.maintenance.internal import flow_topics
from srm.replication.kafka_errors import transactional_prefix

INTERNAL = ("CREATE", "DESCRIBE_CONFIGS", "READ", "WRITE")
GROUP_PREFIX = "__srm."  # the group ids our readers name (committed() of progress, coordinator lookups)
CLUSTER = "kafka-cluster"
# A regex that matches one name only: ordinary characters and escaped ones, no operator.
_LITERAL = re.compile(r"(?:[^.^$*+?{}\[\]\\|()]|\\.)+")


@dataclass(frozen=True)
class Grant:
    """ALLOW ``operations`` on one resource of one cluster, and the feature that needs them."""

    cluster: str
    resource: str  # TOPIC, GROUP, TRANSACTIONAL_ID, CLUSTER
    pattern: str  # LITERAL or PREFIXED
    name: str
    operations: tuple[str, ...]
    why: str


def name_patterns(regexes: tuple[str, ...]) -> list[tuple[str, str]]:
    """ACL patterns covering names that match MM2-style regexes: a plain name is LITERAL, ``prefix.*``
    is PREFIXED; anything else needs every name (LITERAL ``*``)."""
    patterns: list[tuple[str, str]] = []
    for regex in regexes:
        head = regex.removesuffix(".*")
        if not _LITERAL.fullmatch(head):
            return [("LITERAL", "*")]
        plain = re.sub(r"\\(.)", r"\1", head)  # orders\.eu -> orders.eu
        patterns.append(("PREFIXED" if regex.endswith(".*") else "LITERAL", plain))
    return sorted(set(patterns))


def flow_grants(flow: Flow) -> list[Grant]:
    """Every ACL the principals of ``flow``'s source and target clients need."""
    return [*_source_grants(flow), *_target_grants(flow), *_internal_grants(flow)]


def _source_grants(flow: Flow) -> list[Grant]:
    s, source = flow.settings, flow.source
    # Heartbeats replicated from upstream flows (<alias>.heartbeats) fit no ACL pattern: grant them by name.
    topics = name_patterns(s.topics)
    heartbeats = (
        [("LITERAL", "heartbeats")] if s.heartbeats_replication_enabled and ("LITERAL", "*") not in topics else []
    )
    grants = [
        Grant(source, "TOPIC", p, n, ("READ", "DESCRIBE_CONFIGS"), "copy; remote topics and config sync")
        for p, n in topics + heartbeats
    ]
    grants += [Grant(source, "GROUP", p, n, ("DESCRIBE",), "checkpoints") for p, n in name_patterns(s.groups)]
    grants.append(Grant(source, "GROUP", "PREFIXED", GROUP_PREFIX, ("DESCRIBE",), "copy, checkpoints"))
    if s.sync_topic_acls_enabled:
        grants.append(Grant(source, "CLUSTER", "LITERAL", CLUSTER, ("DESCRIBE",), "ACL sync (reads ACLs)"))
    return grants


def _target_grants(flow: Flow) -> list[Grant]:
    s, target = flow.settings, flow.target
    remote = flow.policy.format_remote_topic(flow.source, "")
    operations = ("CREATE", "WRITE", "READ", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")
    why = "copy; remote topics (ALTER: partitions), config sync (ALTER_CONFIGS)"
    topics = [("PREFIXED", remote)] if remote else name_patterns(s.topics)
    grants = [Grant(target, "TOPIC", p, n, operations, why) for p, n in topics]
    txn = transactional_prefix(flow.source, flow.target)
    grants.append(Grant(target, "TRANSACTIONAL_ID", "PREFIXED", txn, ("WRITE", "DESCRIBE"), "copy, ownership"))
    grants.append(Grant(target, "GROUP", "PREFIXED", GROUP_PREFIX, ("DESCRIBE",), "copy progress, readers"))
    group_ops = ("DESCRIBE", "READ") if s.sync_group_offsets_enabled else ("DESCRIBE",)
    why = "failback checkpoints" + (", group offset sync" if s.sync_group_offsets_enabled else "")
    grants += [Grant(target, "GROUP", p, n, group_ops, why) for p, n in name_patterns(s.groups)]
    if s.sync_topic_acls_enabled:
        grants.append(Grant(target, "CLUSTER", "LITERAL", CLUSTER, ("ALTER",), "ACL sync (creates ACLs)"))
    return grants


def _internal_grants(flow: Flow) -> list[Grant]:
    internal = {(t.cluster, t.name) for t in flow_topics(flow)} | {(flow.target, CONTROL_TOPIC)}
    grants = [Grant(c, "TOPIC", "LITERAL", name, INTERNAL, "internal topic") for c, name in sorted(internal)]
    history = history_topic_name(flow)  # its ingested records are deleted (srm.offsets.retention)
    return [
        replace(g, operations=(*g.operations, "DELETE"), why="internal topic; history prune (DELETE)")
        if g.name == history
        else g
        for g in grants
    ]


def acl_bindings(grants: list[Grant], principal: str) -> list[Any]:
    """confluent-kafka ``AclBinding``s of ``grants`` for ``principal`` (``User:<name>``), host ``*``."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    return [
        AclBinding(
            ResourceType["BROKER" if g.resource == "CLUSTER" else g.resource],  # librdkafka's name of CLUSTER
            g.name,
            ResourcePatternType[g.pattern],
            principal,
            "*",
            AclOperation[op],
            AclPermissionType.ALLOW,
        )
        for g in grants
        for op in g.operations
    ]
