"""A flow whose principal holds only the ACLs ``srm-control acls`` lists: maintenance, the copy, checkpoints
and the group offset sync all work on a SASL_SSL cluster with an authorizer, and a denied operation
names the principal, the resource and the operation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from srm import clients
from srm.acls import acl_bindings, flow_grants
from srm.airflow import callables
from srm.config.model import Cluster
from srm.local_security import BrokerSecurity
from srm.offsets.checkpointing import CheckpointPass
from srm.topics import ensure_topic
from tests.checkpointing import commit, committed_on
from tests.conftest import REFERENCE, SASL_PASSWORD
from tests.helpers import produce
from tests.jobs import exactly_once
from tests.replication import contents, replicate, sequenced
from tests.secured import secured_env

pytestmark = pytest.mark.integration
MAINTENANCE = ("validate_internal_topics", "ensure_remote_topics", "sync_topic_configs", "sync_topic_acls")


def super_user(bootstrap: str, folder: Path) -> tuple[BrokerSecurity, Cluster]:
    """The broker's own admin: it creates the user, the ACLs, the source data and the group."""
    security = BrokerSecurity(folder / "kafka" / "secured", "127.0.0.1")
    settings: dict[str, Any] = security.admin_settings()
    settings["sasl.password"] = SecretStr(settings["sasl.password"])
    return security, Cluster(alias="admin", bootstrap_servers=bootstrap, client=settings)


def grant(admin: Any, bindings: list[Any]) -> None:
    # Source and target are one broker here: a binding both sides need is granted once.
    for future in admin.create_acls(list(dict.fromkeys(bindings)), request_timeout=30).values():
        future.result()


def revoke(admin: Any, binding_filters: list[Any]) -> None:
    for future in admin.delete_acls(binding_filters, request_timeout=30).values():
        future.result()


def test_a_flow_runs_with_only_the_acls_srm_control_lists(
    secured: tuple[str, dict[str, str], Path],
    spark: Any,
    tmp_path: Path,
    unique: Callable[[str], str],
) -> None:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    bootstrap, client, folder = secured
    security, admin_cluster = super_user(bootstrap, folder)
    admin = clients.admin_client(admin_cluster)
    user = unique("mirror")  # its password is the session's, which every process has in its environment
    security.upsert_user(bootstrap, user, SASL_PASSWORD, "secured")
    mirror = {**client, "sasl.username": user, "sasl.password": REFERENCE}
    topic, group = unique("lp-orders"), unique("lp-billing")
    settings = {"topics": [topic], "groups": [group], "sync.group.offsets.enabled": True}
    env = secured_env(bootstrap, mirror, tmp_path, settings)
    flow, principal = env.flow(), f"User:{user}"
    grant(admin, acl_bindings(flow_grants(flow), principal))

    ensure_topic(admin, topic, 3)
    produce(admin_cluster, topic, sequenced(3, 600))
    commit(admin_cluster, group, {(topic, p): 50 * (p + 1) for p in range(3)})
    for step in MAINTENANCE:
        getattr(callables, step)(str(env.path), flow.source, flow.target)
    replicate(spark, env)
    report = CheckpointPass(spark, env.config, flow).run()

    assert exactly_once(env, topic, 600, 3) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    remote = flow.policy.format_remote_topic(flow.source, topic)
    # ACL sync mirrored the topic's own bindings (the flow's READ on it) to the remote topic, as READ.
    mirrored = admin.describe_acls(
        AclBindingFilter(
            ResourceType.TOPIC, remote, ResourcePatternType.LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY
        ),
        request_timeout=30,
    ).result()
    assert {(b.principal, b.operation, b.permission_type) for b in mirrored} == {
        (principal, AclOperation.READ, AclPermissionType.ALLOW),
        (principal, AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW),
    }
    copied = contents(env.east, remote)  # the group's next record, 50 (p + 1), at its target offset
    synced = {(remote, p): copied[p][50 * (p + 1)][4] for p in range(3)}
    assert committed_on(admin_cluster, group) == {**{(topic, p): 50 * (p + 1) for p in range(3)}, **synced}, report

    # Without WRITE on the remote topics the copy stops, naming who needs what.
    revoke(
        admin,
        [
            AclBindingFilter(
                ResourceType.TOPIC,
                flow.policy.format_remote_topic(flow.source, ""),
                ResourcePatternType.PREFIXED,
                principal,
                "*",
                AclOperation.WRITE,
                AclPermissionType.ALLOW,
            )
        ],
    )
    produce(admin_cluster, topic, sequenced(3, 30, start=600))
    with pytest.raises(Exception) as denied:
        replicate(spark, env)
    message = str(denied.value)
    assert "not authorized to write" in message, message
    assert f"{principal} (clusters.{flow.target}) needs WRITE on TOPIC" in message and repr(remote) in message
