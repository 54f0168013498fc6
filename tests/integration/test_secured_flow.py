"""The whole flow on secured clusters: between two SASL_SSL/SCRAM clusters (only committed records,
exactly once, heartbeats, checkpoints, failover and failback through srm-control), and from an mTLS
cluster to a SASL_SSL one (configs and ACLs mirrored; a certificate without ACLs is named when denied)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from srm.airflow import callables
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.topics import describe_topic_configs, ensure_topic
from srm.offsets.checkpointing import CheckpointPass
from tests.checkpointing import commit, committed_on, read_from
from tests.conftest import Run
from tests.helpers import produce
from tests.replication import (
    as_row,
    contents,
    produce_transactions,
    replicate,
    seq_of,
    sequence_report,
    sequenced,
    without_offsets,
)
from tests.secured import SecuredCluster, maintain, secured_env

pytestmark = pytest.mark.integration


def test_failover_and_failback_are_exact_between_sasl_ssl_clusters(
    secured: dict[str, SecuredCluster], spark: Any, tmp_path: Path, unique: Callable[[str], str], cli: Run
) -> None:
    topic, group, back = unique("sec-orders"), unique("sec-billing"), unique("sec-returning")
    env = secured_env(secured, tmp_path, {"topics": [topic]})
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    flow_args = ("--source", flow.source, "--target", flow.target)
    ensure_topic(clients.admin_client(env.west), topic, 3)
    produce(env.west, topic, sequenced(3, 300))
    batches = [sequenced(3, 30, start=300 + 30 * n) for n in range(10)]
    done = produce_transactions(env.west, topic, batches, {2, 5, 8}, unique("sec-txn"))
    committed: dict[int, list[int]] = {p: [s for s in range(300) if s % 3 == p] for p in range(3)}
    for record in (r for n in sorted(done) for r in batches[n]):
        committed[record["partition"]].append(seq_of(as_row(record)))

    maintain(env)
    assert callables.emit_heartbeats(str(env.path), flow.source, flow.target, 1) >= 1
    replicate(spark, env)
    source, target = contents(env.west, topic), contents(env.east, remote)
    assert without_offsets(target) == without_offsets(source)
    assert sequence_report(target, committed) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    assert sum(map(len, target.values())) == 300 + 30 * len(done) >= 300 + 30 * 5

    positions = {0: 10, 1: 55, 2: 99}
    commit(env.west, group, {(topic, p): o for p, o in positions.items()})
    CheckpointPass(env.config, flow).run()
    code, out, err = cli(env.path, "status", *flow_args)
    assert code == 0, err
    assert re.search(r"last replicated heartbeat: \d+ s ago", out) and "  last error: none" in out, out

    code, out, err = cli(env.path, "failover", *flow_args, "--group", group)
    assert code == 0 and "dry run" in out and committed_on(env.east, group) == {}, out + err
    code, out, err = cli(env.path, "failover", *flow_args, "--group", group, "--apply")
    assert code == 0 and out.count("applied") == 3, out + err
    moved = committed_on(env.east, group)
    for partition, upstream in positions.items():
        unread = [r[:4] for r in source[partition] if r[4] >= upstream]
        assert read_from(env.east, remote, partition, moved[(remote, partition)]) == unread, partition

    # A group that read the remote topic on east goes back to the topic on west at the same records.
    on_east = {0: 20, 1: 3, 2: 150}
    commit(env.east, back, {(remote, p): target[p][i][4] for p, i in on_east.items()})
    code, out, err = cli(env.path, "failback", *flow_args, "--group", back, "--apply")
    assert code == 0 and out.count("applied") == 3, out + err
    returned = committed_on(env.west, back)
    for partition, index in on_east.items():
        assert source[partition][index][4] == returned[(topic, partition)], partition


def test_a_flow_from_an_mtls_cluster_to_a_sasl_ssl_cluster(
    mtls: SecuredCluster,
    secured: dict[str, SecuredCluster],
    spark: Any,
    tmp_path: Path,
    unique: Callable[[str], str],
    *,
    cli: Run,
) -> None:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    topic, group = unique("mtls-orders"), unique("mtls-reader")
    env = secured_env({"west": mtls, "east": secured["east"]}, tmp_path, {"topics": [topic]})
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    ensure_topic(clients.admin_client(env.west), topic, 2, config={"retention.ms": "7200000"})
    produce(env.west, topic, sequenced(2, 400))
    source_admin = clients.admin_client(env.west)

    def allow(operation: Any) -> AclBinding:
        return AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            "User:auditor",
            "*",
            operation,
            AclPermissionType.ALLOW,
        )

    for future in source_admin.create_acls([allow(AclOperation.DESCRIBE)], request_timeout=30).values():
        future.result()

    maintain(env)
    replicate(spark, env)
    expected = {p: [s for s in range(400) if s % 2 == p] for p in range(2)}
    assert sequence_report(contents(env.east, remote), expected) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    assert describe_topic_configs(clients.admin_client(env.east), remote)["retention.ms"] == "7200000"
    mirrored = [(b.principal, b.operation) for b in _acls_of(clients.admin_client(env.east), remote)]
    assert mirrored == [("User:auditor", AclOperation.DESCRIBE)]

    commit(env.west, group, {(topic, 0): 40, (topic, 1): 7})
    CheckpointPass(env.config, flow).run()
    code, out, err = cli(env.path, "translate", "--source", flow.source, "--target", flow.target, "--group", group)
    assert code == 0 and len(out.splitlines()) == 2, out + err
    private = mtls.client["ssl.key.pem"].splitlines()[1]  # a line of the key itself
    for args in (("validate",), ("validate", "--json"), ("status", "--source", flow.source, "--target", flow.target)):
        code, out, err = cli(env.path, *args)
        assert code == 0, out + err
        assert private not in out + err, args

    # A certificate the CA signed for a principal that may only DESCRIBE the topic: the first call that
    # needs more names the certificate, the operation and the topic.
    certificate, key = mtls.security.issue_client("auditor")
    data = yaml.safe_load(env.path.read_text())
    data["clusters"][flow.source]["client"] |= {"ssl.certificate.pem": certificate, "ssl.key.pem": key}
    as_auditor = tmp_path / "auditor.yaml"
    as_auditor.write_text(yaml.safe_dump(data))
    with pytest.raises(SrmError) as denied:
        callables.sync_topic_configs(str(as_auditor), flow.source, flow.target)
    who = f"the principal of the client certificate CN=auditor (clusters.{flow.source})"
    assert f"TOPIC_AUTHORIZATION_FAILED: {who} needs DESCRIBE_CONFIGS on TOPIC {topic!r}" in str(denied.value), (
        denied.value
    )


def _acls_of(admin: Any, topic: str) -> list[Any]:
    from confluent_kafka.admin import (
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    query = AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY, AclPermissionType.ANY
    )
    return list(admin.describe_acls(query, request_timeout=30).result())
