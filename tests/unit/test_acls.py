"""The ACLs a flow's principals need: per cluster, per feature, with MM2-style regexes as ACL patterns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from srm.config import SrmConfig, parse_config
from srm.control.cli import main
from srm.operations.acls import acl_bindings, flow_grants, name_patterns

CLUSTERS = """
clusters:
  a:
    bootstrap.servers: "127.0.0.1:1"
    client: {security.protocol: SASL_SSL, sasl.mechanism: SCRAM-SHA-512, sasl.username: mirror}
  b: {bootstrap.servers: "127.0.0.1:2"}
"""


def config(flow: str) -> SrmConfig:
    parsed, issues = parse_config(CLUSTERS + "flows:\n  - " + flow + "\n", "srm.yaml")
    assert not issues and parsed is not None, issues
    return parsed


def rows(flow: str) -> set[tuple[str, str, str, str, str]]:
    grants = flow_grants(config(flow).flow("a", "b"))
    return {(g.cluster, g.resource, g.pattern, g.name, op) for g in grants for op in g.operations}


@pytest.mark.parametrize(
    ("regexes", "patterns"),
    [
        (("orders",), [("LITERAL", "orders")]),
        (
            ("orders", r"payments\..*", "inv-.*"),
            [("LITERAL", "orders"), ("PREFIXED", "inv-"), ("PREFIXED", "payments.")],
        ),
        ((".*",), [("LITERAL", "*")]),
        (("orders", "a|b"), [("LITERAL", "*")]),  # a regex no ACL pattern covers: every name
        (("ord.rs",), [("LITERAL", "*")]),
    ],
)
def test_regexes_become_acl_patterns(regexes: tuple[str, ...], patterns: list[tuple[str, str]]) -> None:
    assert name_patterns(regexes) == patterns


def test_a_flows_acls_per_cluster() -> None:
    got = rows("{source: a, target: b, topics: [orders], groups: [billing]}")
    # source: read the topics (and heartbeats), describe groups, internal topics of the failback direction
    assert {("a", "TOPIC", "LITERAL", "orders", "READ"), ("a", "TOPIC", "LITERAL", "orders", "DESCRIBE_CONFIGS")} <= got
    assert ("a", "TOPIC", "LITERAL", "heartbeats", "READ") in got
    assert ("a", "GROUP", "LITERAL", "billing", "DESCRIBE") in got
    assert ("a", "TOPIC", "LITERAL", "mm2-offset-syncs.b.internal", "WRITE") in got
    assert ("a", "TOPIC", "LITERAL", "b.checkpoints.internal", "CREATE") in got
    # target: remote topics by prefix, the flow's transactional ids, internal topics
    for op in ("CREATE", "WRITE", "ALTER", "ALTER_CONFIGS"):
        assert ("b", "TOPIC", "PREFIXED", "a.", op) in got
    assert ("b", "TRANSACTIONAL_ID", "PREFIXED", "srm-replicate.a.b.", "WRITE") in got
    assert ("b", "GROUP", "PREFIXED", "__srm.", "DESCRIBE") in got
    for name in ("srm-offsets.a.internal", "srm-offset-syncs.a.internal", "srm-owners.internal", "srm-meta.internal"):
        assert {("b", "TOPIC", "LITERAL", name, op) for op in ("CREATE", "READ", "WRITE")} <= got
    assert ("b", "CLUSTER", "LITERAL", "kafka-cluster", "ALTER") in got  # ACL sync creates ACLs
    # DELETE on the sync history's topic alone: the prune deletes its ingested records
    assert [r for r in got if r[4] in ("ALL", "DELETE", "IDEMPOTENT_WRITE")] == [
        ("b", "TOPIC", "LITERAL", "srm-offset-syncs.a.internal", "DELETE")
    ]
    assert ("b", "GROUP", "LITERAL", "billing", "READ") not in got  # only the group offset sync writes groups


def test_optional_features_add_or_remove_their_acls() -> None:
    got = rows(
        "{source: a, target: b, topics: [orders], groups: [billing], sync.topic.acls.enabled: false, "
        "sync.group.offsets.enabled: true, offset-syncs.topic.location: target}"
    )
    assert not [r for r in got if r[1] == "CLUSTER"]
    assert ("b", "GROUP", "LITERAL", "billing", "READ") in got
    assert ("b", "TOPIC", "LITERAL", "mm2-offset-syncs.a.internal", "WRITE") in got
    assert not [r for r in got if r[3] == "mm2-offset-syncs.b.internal"]


def test_identity_flows_need_the_topic_names_themselves_on_the_target() -> None:
    got = rows("{source: a, target: b, topics: ['orders.*'], replication.policy.class: identity}")
    assert ("b", "TOPIC", "PREFIXED", "orders", "WRITE") in got


def test_bindings_for_a_principal() -> None:
    from confluent_kafka.admin import ResourcePatternType, ResourceType

    bindings = acl_bindings(flow_grants(config("{source: a, target: b}").flow("a", "b")), "User:mirror")
    assert all(b.principal == "User:mirror" and b.host == "*" for b in bindings)
    kinds = {(b.restype, b.resource_pattern_type) for b in bindings}
    assert (ResourceType.TRANSACTIONAL_ID, ResourcePatternType.PREFIXED) in kinds
    assert (ResourceType.BROKER, ResourcePatternType.LITERAL) in kinds  # librdkafka's name of CLUSTER


def test_srm_control_acls_prints_them_with_the_principals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "srm.yaml"
    path.write_text(CLUSTERS + "flows:\n  - {source: a, target: b, topics: [orders]}\n")
    assert main(["acls", "--source", "a", "--target", "b", "--config", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["principals"] == {"a": "User:mirror (clusters.a)", "b": "User:ANONYMOUS (clusters.b: no authentication)"}
    assert {
        "cluster": "b",
        "resource": "TRANSACTIONAL_ID",
        "pattern": "PREFIXED",
        "name": "srm-replicate.a.b.",
        "operations": ["WRITE", "DESCRIBE"],
        "why": "copy, ownership",
    } in out["acls"]
    assert main(["acls", "--source", "a", "--target", "b", "--config", str(path)]) == 0
    text = capsys.readouterr().out
    assert "User:mirror (clusters.a)" in text and "srm-replicate.a.b." in text
