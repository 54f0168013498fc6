"""A flow whose principal holds only the ACLs ``srm-control acls`` lists: maintenance, the copy, checkpoints
and the group offset sync all work on a pair of SASL_SSL clusters with an authorizer (each granting the
user only its own side's rows), and a denied operation names the principal, the resource and the operation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.offsets.checkpointing import CheckpointPass
from srm.operations.acls import acl_bindings, flow_grants
from tests.checkpointing import commit, committed_on
from tests.conftest import REFERENCE, SASL_PASSWORD
from tests.helpers import produce
from tests.jobs import exactly_once
from tests.replication import contents, replicate, sequenced
from tests.secured import SecuredCluster, maintain, secured_env

pytestmark = pytest.mark.integration


def grant(admin: Any, bindings: list[Any]) -> None:
    # Two rows may need the same binding (a topic the flow reads is also internal, say): granted once.
    for future in admin.create_acls(list(dict.fromkeys(bindings)), request_timeout=30).values():
        future.result()


def revoke(admin: Any, binding_filters: list[Any]) -> None:
    for future in admin.delete_acls(binding_filters, request_timeout=30).values():
        future.result()


def test_a_flow_runs_with_only_the_acls_srm_control_lists(
    secured: dict[str, SecuredCluster],
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

    user = unique("mirror")  # its password is the session's, which every process has in its environment
    for cluster in secured.values():
        cluster.security.upsert_user(cluster.bootstrap, user, SASL_PASSWORD, cluster.alias)
    topic, group = unique("lp-orders"), unique("lp-billing")
    settings = {"topics": [topic], "groups": [group], "sync.group.offsets.enabled": True}
    env = secured_env(secured, tmp_path, settings, {"sasl.username": user, "sasl.password": REFERENCE})
    flow, principal = env.flow(), f"User:{user}"
    source, target = secured["west"].admin(), secured["east"].admin()
    grants = flow_grants(flow)
    for alias, cluster in ((flow.source, source), (flow.target, target)):
        grant(clients.admin_client(cluster), acl_bindings([g for g in grants if g.cluster == alias], principal))

    ensure_topic(clients.admin_client(source), topic, 3)
    produce(source, topic, sequenced(3, 600))
    commit(source, group, {(topic, p): 50 * (p + 1) for p in range(3)})
    maintain(env)  # every step: internal topics, remote topics, configs, ACLs
    replicate(spark, env)
    report = CheckpointPass(env.config, flow).run()

    assert exactly_once(env, topic, 600, 3) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    remote = flow.policy.format_remote_topic(flow.source, topic)
    # ACL sync mirrored the topic's own bindings (the flow's READ on it) to the remote topic, as READ.
    admin = clients.admin_client(target)
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
    assert committed_on(target, group) == synced, report

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
    produce(source, topic, sequenced(3, 30, start=600))
    with pytest.raises(Exception) as denied:
        replicate(spark, env)
    message = str(denied.value)
    assert "not authorized to write" in message, message
    assert f"{principal} (clusters.{flow.target}) needs WRITE on TOPIC" in message and repr(remote) in message
