"""Replication policies against the examples of mm2-compat.md section 4."""

from __future__ import annotations

import pytest

from include.policies import (
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    PolicyLoadError,
    ReplicationPolicy,
    load_policy,
)
from srm.config import parse_config
from srm.kafka.control_lists import CONTROL_TOPIC
from srm.kafka.internal_topics import history_topic_name, progress_topic_name
from srm.maintenance.internal import flow_topics

DEFAULT = DefaultReplicationPolicy()


def test_default_formats_remote_topics_with_source_prefix() -> None:
    assert DEFAULT.format_remote_topic("us-west", "topic1") == "us-west.topic1"
    assert DEFAULT.format_remote_topic("us-east", "us-west.topic1") == "us-east.us-west.topic1"


@pytest.mark.parametrize(
    ("topic", "source"),
    [
        ("a.b.c", "a"),
        ("topic", None),
        ("foo.", None),
        (".b", ""),
        ("us-west.topic1", "us-west"),
        ("", None),
        (".", None),
        ("a..b", "a"),
    ],
)
def test_default_topic_source_splits_like_java(topic: str, source: str | None) -> None:
    assert DEFAULT.topic_source(topic) == source


def test_default_upstream_and_original_topic() -> None:
    assert DEFAULT.upstream_topic("us-west.us-east.t") == "us-east.t"
    assert DEFAULT.upstream_topic("t") is None
    assert DEFAULT.original_topic("us-west.us-east.t") == "t"
    assert DEFAULT.original_topic("t") == "t"


@pytest.mark.parametrize("topic", ["heartbeats", "source1.heartbeats", "source2.source1.heartbeats"])
def test_is_heartbeats_topic(topic: str) -> None:
    assert DEFAULT.is_heartbeats_topic(topic)


@pytest.mark.parametrize("topic", ["heartbeats!", "!heartbeats", "source1heartbeats", "source1-heartbeats"])
def test_is_not_heartbeats_topic(topic: str) -> None:
    assert not DEFAULT.is_heartbeats_topic(topic)


def test_checkpoints_topics() -> None:
    assert DEFAULT.checkpoints_topic("source1") == "source1.checkpoints.internal"
    assert DEFAULT.is_checkpoints_topic("source1.checkpoints.internal")
    assert not DEFAULT.is_checkpoints_topic("checkpoints.internal")


def test_internal_topic_names() -> None:
    assert DEFAULT.heartbeats_topic() == "heartbeats"
    assert DEFAULT.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"


# Kafka 4.3.1's rule (ReplicationPolicy.isInternalTopic, DefaultReplicationPolicy.isMM2InternalTopic),
# plus this project's own srm* topics; MM2 2.x's "any .internal/-internal suffix" is gone.
INTERNAL = [
    "__consumer_offsets",
    ".hiddentopic",
    "mm2-offsets.CLUSTER.internal",
    "mm2-offset-syncs.B.internal",
    "us-west.checkpoints.internal",
    "srm-meta.internal",
    "srm-owners.internal",
    "srm-control.internal",
    "srm-offsets.us-west.internal",
    "srm-offset-syncs.us-west.internal",
]
NOT_INTERNAL = [
    "orders",
    "orders.internal",
    "orders-internal",
    "connect-offsets-internal",
    "mm2-offsets-CLUSTER-internal",  # Kafka 4.3.1: only "<separator>internal" counts
    "mm2-offsets_CLUSTER_internal",
    "checkpoints.internal",
    "srm-orders",
    "us-west.heartbeats",
]


@pytest.mark.parametrize("topic", INTERNAL)
def test_is_internal_topic(topic: str) -> None:
    assert DEFAULT.is_internal_topic(topic)


@pytest.mark.parametrize("topic", NOT_INTERNAL)
def test_is_not_internal_topic(topic: str) -> None:
    assert not DEFAULT.is_internal_topic(topic)


def test_is_mm2_internal_topic_means_what_kafka_4_3_1_means() -> None:
    assert DEFAULT.is_mm2_internal_topic("mm2-offset-syncs.B.internal")
    assert DEFAULT.is_mm2_internal_topic("mm2-configs.A.internal")
    assert DEFAULT.is_mm2_internal_topic("us-west.checkpoints.internal")
    assert not DEFAULT.is_mm2_internal_topic("orders.internal")
    assert not DEFAULT.is_mm2_internal_topic("__consumer_offsets")  # internal, but Kafka's, not MM2's
    assert not DEFAULT.is_mm2_internal_topic("srm-meta.internal")  # internal, but ours, not MM2's


def test_custom_separator_internal_topics_use_it() -> None:
    policy = DefaultReplicationPolicy(separator="__")
    for topic in (
        "mm2-offsets__CLUSTER__internal",
        "mm2-offset-syncs__B__internal",
        "us-west__checkpoints__internal",
        "srm-offsets__us-west__internal",
        "srm-offset-syncs__us-west__internal",
        "srm-meta.internal",  # fixed names keep "." whatever the separator
        "srm-owners.internal",
        "srm-control.internal",
        "__consumer_offsets",
        ".hiddentopic",
    ):
        assert policy.is_internal_topic(topic), topic
    for topic in (
        "orders.internal",
        "orders__internal",
        "mm2-offsets.CLUSTER.internal",
        "us-west.checkpoints.internal",
    ):
        assert not policy.is_internal_topic(topic), topic
    disabled = DefaultReplicationPolicy(separator="__", internal_topic_separator_enabled=False)
    assert disabled.is_internal_topic("mm2-offset-syncs.B.internal")
    assert disabled.is_internal_topic("us-west.checkpoints.internal")
    assert not disabled.is_internal_topic("mm2-offset-syncs__B__internal")


@pytest.mark.parametrize(("separator", "enabled"), [(".", True), ("__", True), ("__", False), ("-", True)])
def test_every_topic_this_project_owns_is_internal(separator: str, enabled: bool) -> None:
    """Names as srm builds them: srm-offset-syncs, srm-offsets, srm-owners, srm-meta, srm-control,
    MM2's offset syncs and checkpoints; heartbeats are the one owned topic that is replicated."""
    config, issues = parse_config(
        f"""
clusters:
  us-west: {{bootstrap.servers: "127.0.0.1:1"}}
  us-east: {{bootstrap.servers: "127.0.0.1:2"}}
flows:
  - source: us-west
    target: us-east
    replication.policy.separator: "{separator}"
    replication.policy.internal.topic.separator.enabled: {str(enabled).lower()}
""",
        "test.yaml",
    )
    assert config is not None and not issues, issues
    flow = config.flow("us-west", "us-east")
    owned = {t.name for t in flow_topics(flow)} | {CONTROL_TOPIC}
    assert {"srm-meta.internal", "srm-owners.internal", "srm-control.internal"} <= owned
    assert history_topic_name(flow) in owned and progress_topic_name(flow) in owned
    for name in owned - {flow.policy.heartbeats_topic()}:
        assert flow.policy.is_internal_topic(name), name
    assert not flow.policy.is_internal_topic(flow.policy.heartbeats_topic())


def test_custom_separator_shapes_remote_and_internal_names() -> None:
    policy = DefaultReplicationPolicy(separator="__")
    assert policy.format_remote_topic("A", "t") == "A__t"
    assert policy.topic_source("A__t") == "A"
    assert policy.upstream_topic("A__B__t") == "B__t"
    assert policy.checkpoints_topic("A") == "A__checkpoints__internal"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs__B__internal"
    assert policy.is_checkpoints_topic("A__checkpoints__internal")
    assert policy.is_internal_topic("mm2-offset-syncs__B__internal")
    assert policy.heartbeats_topic() == "heartbeats"
    assert policy.is_heartbeats_topic("A__heartbeats")


def test_internal_separator_can_be_disabled() -> None:
    policy = DefaultReplicationPolicy(separator="__", internal_topic_separator_enabled=False)
    assert policy.format_remote_topic("A", "t") == "A__t"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    assert policy.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"


def test_identity_keeps_names_but_prefixes_heartbeats() -> None:
    policy = IdentityReplicationPolicy(source_cluster_alias="primary")
    assert policy.format_remote_topic("primary", "orders") == "orders"
    assert policy.format_remote_topic("primary", "heartbeats") == "primary.heartbeats"
    assert policy.topic_source("orders") == "primary"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("orders") == "orders"
    assert policy.topic_source("backup.heartbeats") == "backup"
    assert policy.upstream_topic("backup.heartbeats") == "heartbeats"
    assert policy.is_heartbeats_topic("backup.primary.heartbeats")


def test_load_policy_by_short_name_and_mm2_class_name() -> None:
    assert type(load_policy("default")) is DefaultReplicationPolicy
    assert type(load_policy("org.apache.kafka.connect.mirror.IdentityReplicationPolicy")) is IdentityReplicationPolicy
    identity = load_policy("identity", source_cluster_alias="A")
    assert identity.topic_source("t") == "A"


class SuffixPolicy(DefaultReplicationPolicy):
    """A custom policy: remote topics are <topic>-from-<source>."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{topic}-from-{source_alias}"

    def topic_source(self, topic: str) -> str | None:
        head, sep, tail = topic.rpartition("-from-")
        return tail if sep and head else None

    def upstream_topic(self, topic: str) -> str | None:
        head, sep, _ = topic.rpartition("-from-")
        return head if sep and head else None


class Incomplete(ReplicationPolicy):
    def topic_source(self, topic: str) -> str | None:
        return None


class NotAPolicy:
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return topic


def test_custom_policy_by_dotted_path() -> None:
    policy = load_policy(f"{__name__}.SuffixPolicy")
    assert policy.format_remote_topic("A", "t") == "t-from-A"
    assert policy.original_topic("t-from-A-from-B") == "t"
    assert load_policy(f"{__name__}:SuffixPolicy").topic_source("t-from-A") == "A"


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("no_such_module_xyz.Policy", "cannot import module 'no_such_module_xyz'"),
        (f"{__name__}.Missing", f"module '{__name__}' has no class 'Missing'"),
        (f"{__name__}.Incomplete", "does not implement format_remote_topic"),
        (f"{__name__}.NotAPolicy", "lacks checkpoints_topic"),
        ("org.apache.kafka.connect.mirror.MyJavaPolicy", "is a Java class"),
        ("Policy", "neither 'default', 'identity' nor a dotted path"),
    ],
)
def test_custom_policy_errors_say_what_is_wrong(name: str, message: str) -> None:
    with pytest.raises(PolicyLoadError, match=message.replace(".", r"\.")):
        load_policy(name)
