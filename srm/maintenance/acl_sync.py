"""ACL sync (``sync.topic.acls.enabled``), MM2's rules.

Only TOPIC + LITERAL bindings of replicated topics are mirrored, renamed to the remote topic;
ALLOW WRITE is never copied (only the replication writes the remote topic), ALLOW ALL becomes
ALLOW READ, DENY bindings are copied as they are; nothing is ever deleted on the target. A source
without an authorizer (SECURITY_DISABLED) is skipped quietly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from srm.errors import SrmError
from srm.kafka.retry import acl_hint, needs


@dataclass(frozen=True)
class Acl:
    topic: str
    principal: str
    host: str
    operation: str  # READ, WRITE, ALL, DESCRIBE, ...
    permission: str  # ALLOW or DENY

    def __str__(self) -> str:
        return f"{self.permission} {self.principal} {self.operation} on topic {self.topic} from {self.host}"


def mirrored(acl: Acl, remote: str) -> Acl | None:
    """The binding to create on the target for ``acl`` of the source topic, or None."""
    if acl.permission == "ALLOW" and acl.operation == "WRITE":
        return None
    operation = "READ" if acl.permission == "ALLOW" and acl.operation == "ALL" else acl.operation
    return Acl(remote, acl.principal, acl.host, operation, acl.permission)


def _bindings(admin: Any) -> list[Any] | None:
    """Every TOPIC LITERAL binding, or None when the cluster has no authorizer."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    anything: Any = None  # the filter's "match any value" (its type hints say str)
    query = AclBindingFilter(
        ResourceType.TOPIC,
        anything,
        ResourcePatternType.LITERAL,
        anything,
        anything,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    try:
        return list(admin.describe_acls(query, request_timeout=30).result(timeout=30))
    except KafkaException as exc:
        if exc.args[0].name() == "SECURITY_DISABLED":
            return None
        detail = acl_hint(exc.args[0], needs(admin, "DESCRIBE", "CLUSTER 'kafka-cluster'"))
        raise SrmError(f"cannot read ACLs: {detail}") from None


def source_acls(admin: Any, topics: set[str]) -> list[Acl] | None:
    found = _bindings(admin)
    if found is None:
        return None
    return [
        Acl(b.name, b.principal, b.host, b.operation.name, b.permission_type.name) for b in found if b.name in topics
    ]


def sync_topic_acls(source_admin: Any, target_admin: Any, topics: dict[str, str]) -> list[Acl] | None:
    """Create on the target the mirrored bindings it lacks; the bindings created, None if skipped."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    acls = source_acls(source_admin, set(topics))
    if acls is None:
        return None
    wanted = {m for a in acls if (m := mirrored(a, topics[a.topic])) is not None}
    existing = {
        Acl(b.name, b.principal, b.host, b.operation.name, b.permission_type.name)
        for b in (_bindings(target_admin) or [])
    }
    missing = sorted(wanted - existing, key=str)
    if not missing:
        return []
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            a.topic,
            ResourcePatternType.LITERAL,
            a.principal,
            a.host,
            AclOperation[a.operation],
            AclPermissionType[a.permission],
        )
        for a in missing
    ]
    for future in target_admin.create_acls(bindings, request_timeout=30).values():
        try:
            future.result(timeout=30)
        except KafkaException as exc:
            detail = acl_hint(exc.args[0], needs(target_admin, "ALTER", "CLUSTER 'kafka-cluster'"))
            raise SrmError(f"cannot create ACLs: {detail}") from None
    return missing
