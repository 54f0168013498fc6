"""Pure rules of the maintenance DAG: ACL mirroring, topic config changes, heartbeat pairs, srm-meta."""

from __future__ import annotations

from typing import Any

from srm.config import SrmConfig, parse_config
from srm.maintenance.acl_sync import Acl, mirrored
from srm.maintenance.config_sync import ConfigChange, config_changes
from srm.maintenance.heartbeats import heartbeat_pairs
from srm.maintenance.meta import meta_record
from srm.mm2.topic_configs import ConfigValue

CONFIG = """\
clusters:
  a: {bootstrap.servers: "127.0.0.1:1"}
  b: {bootstrap.servers: "127.0.0.1:2"}
  c: {bootstrap.servers: "127.0.0.1:3"}
flows:
  - {source: a, target: b}
  - {source: b, target: a}
  - {source: a, target: c}
  - {source: b, target: c, emit.heartbeats.enabled: false}
"""


def config(text: str = CONFIG, **flow: Any) -> SrmConfig:
    if flow:
        settings = ", ".join(f"{k}: {v}" for k, v in flow.items())
        text = text.replace("{source: a, target: b}", f"{{source: a, target: b, {settings}}}")
    parsed, issues = parse_config(text, "test.yaml")
    assert not issues and parsed is not None, issues
    return parsed


def test_acls_are_mirrored_as_mm2_does() -> None:
    def acl(operation: str, permission: str = "ALLOW") -> Acl:
        return Acl("orders", "User:alice", "*", operation, permission)

    assert mirrored(acl("READ"), "a.orders") == Acl("a.orders", "User:alice", "*", "READ", "ALLOW")
    assert mirrored(acl("ALL"), "a.orders") == Acl("a.orders", "User:alice", "*", "READ", "ALLOW")
    assert mirrored(acl("WRITE"), "a.orders") is None  # only the replication writes remote topics
    assert mirrored(acl("DESCRIBE"), "a.orders") == Acl("a.orders", "User:alice", "*", "DESCRIBE", "ALLOW")
    assert mirrored(acl("WRITE", "DENY"), "a.orders") == Acl("a.orders", "User:alice", "*", "WRITE", "DENY")
    assert mirrored(acl("ALL", "DENY"), "a.orders") == Acl("a.orders", "User:alice", "*", "ALL", "DENY")


def topic(name: str, value: str | None, source: str = "DYNAMIC_TOPIC_CONFIG", read_only: bool = False) -> ConfigValue:
    return ConfigValue(name, value, source, read_only)


def test_config_changes_set_differences_and_reset_what_the_source_leaves_default() -> None:
    flow = config().flow("a", "b")
    source = [
        topic("retention.ms", "7200000"),
        topic("cleanup.policy", "compact"),
        topic("segment.bytes", "1073741824", "DEFAULT_CONFIG"),  # the source's default: not copied
        topic("min.insync.replicas", "2"),  # excluded by MM2's default config.properties.exclude
    ]
    target = [
        topic("retention.ms", "3600000"),
        topic("cleanup.policy", "compact"),
        topic("max.message.bytes", "500000"),  # set on the target only: back to the target's default
        topic("min.insync.replicas", "1"),  # excluded: left alone
        topic("segment.bytes", "1073741824", "DEFAULT_CONFIG"),
    ]
    changes = config_changes(flow, "orders", "a.orders", source, target)
    assert changes == [
        ConfigChange("a.orders", "retention.ms", "3600000", "7200000"),
        ConfigChange("a.orders", "max.message.bytes", "500000", None),
    ]
    assert [str(c) for c in changes] == [
        "a.orders: retention.ms 3600000 -> 7200000",
        "a.orders: max.message.bytes 500000 -> (default)",
    ]
    assert config_changes(flow, "orders", "a.orders", source, [*source[:2]]) == []


def test_config_changes_with_defaults_from_the_source() -> None:
    flow = config(**{"use.defaults.from": "source"}).flow("a", "b")
    source = [topic("segment.bytes", "536870912", "STATIC_BROKER_CONFIG")]
    target = [topic("segment.bytes", "1073741824", "DEFAULT_CONFIG")]
    assert config_changes(flow, "orders", "a.orders", source, target) == [
        ConfigChange("a.orders", "segment.bytes", "1073741824", "536870912")
    ]


def test_read_only_target_settings_are_never_changed() -> None:
    flow = config().flow("a", "b")
    source = [topic("retention.ms", "7200000")]
    target = [topic("retention.ms", "3600000", read_only=True)]
    assert config_changes(flow, "orders", "a.orders", source, target) == []


def test_every_ordered_pair_emits_heartbeats_once() -> None:
    parsed = config()
    pairs = {flow.name: heartbeat_pairs(parsed, flow) for flow in parsed.enabled_flows()}
    assert pairs == {
        "a->b": [("a", "b")],  # b->a exists and emits (b, a)
        "b->a": [("b", "a")],
        "a->c": [("a", "c"), ("c", "a")],  # no c->a flow: a's heartbeats need (c, a) from somewhere
        "b->c": [],  # emit.heartbeats.enabled: false
    }


def test_meta_record_lists_every_pair() -> None:
    flow = config().flow("a", "b")
    record = meta_record(flow, {"orders": "a.orders", "heartbeats": "a.heartbeats"})
    assert record["source"] == "a" and record["target"] == "b"
    assert record["pairs"] == [
        {"source_topic": "heartbeats", "target_topic": "a.heartbeats"},
        {"source_topic": "orders", "target_topic": "a.orders"},
    ]
