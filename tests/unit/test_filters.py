"""The topic and group predicates: MM2's filters, internal-topic rule, cycle rule and heartbeats."""

from __future__ import annotations

import pytest

from include.policies import DefaultReplicationPolicy, IdentityReplicationPolicy
from srm.config import FlowSettings
from srm.config.filters import NameFilter, is_cycle, should_replicate_group, should_replicate_topic
from srm.config.settings import DEFAULT_GROUPS_EXCLUDE, DEFAULT_TOPICS_EXCLUDE

ALL = NameFilter((".*",))


def replicated(topic: str, policy: object | None = None, topics: NameFilter = ALL, heartbeats: bool = True) -> bool:
    return should_replicate_topic(
        topic,
        target="target",
        policy=policy or DefaultReplicationPolicy(),  # type: ignore[arg-type]
        topics=topics,
        heartbeats_replication_enabled=heartbeats,
    )


@pytest.mark.parametrize(
    "topic",
    [
        "target.topic1",
        "target.source.topic1",
        "source.target.topic1",
        "target.source.target.topic1",
        "source.target.source.topic1",
    ],
)
def test_cycles_are_not_replicated(topic: str) -> None:
    assert is_cycle(topic, "target", DefaultReplicationPolicy())
    assert not replicated(topic)


@pytest.mark.parametrize("topic", ["topic1", "source.topic1"])
def test_non_cycles_are_replicated(topic: str) -> None:
    assert replicated(topic)


IDENTITY = IdentityReplicationPolicy(source_cluster_alias="source")


@pytest.mark.parametrize(
    "topic", ["topic1", "target.topic1", "target.source.topic1", "source.target.topic1", "source.topic1"]
)
def test_identity_replicates_every_data_topic(topic: str) -> None:
    assert replicated(topic, IDENTITY)


@pytest.mark.parametrize("topic", ["target.heartbeats", "target.source.heartbeats", "source.target.heartbeats"])
def test_identity_does_not_replicate_heartbeats_back(topic: str) -> None:
    assert not replicated(topic, IDENTITY)


@pytest.mark.parametrize("topic", ["heartbeats", "othersource.heartbeats"])
def test_identity_replicates_other_heartbeats(topic: str) -> None:
    assert replicated(topic, IDENTITY)


DEFAULT_TOPICS = NameFilter((".*",), DEFAULT_TOPICS_EXCLUDE)


def test_default_topic_filter_is_the_flow_settings_default() -> None:
    settings = FlowSettings()
    assert NameFilter(settings.topics, settings.topics_exclude) == DEFAULT_TOPICS


@pytest.mark.parametrize(
    "topic",
    [
        "mm2-offsets.X.internal",
        "mm2-offset-syncs.target.internal",
        "source.checkpoints.internal",
        "foo.replica",
        "__consumer_offsets",
        ".hidden",
        "srm-meta.internal",
        "srm-owners.internal",
        "srm-control.internal",
        "srm-offsets.source.internal",
        "srm-offset-syncs.source.internal",
    ],
)
def test_default_exclusions_and_internal_topics(topic: str) -> None:
    assert not replicated(topic, topics=DEFAULT_TOPICS)


@pytest.mark.parametrize("topic", ["orders.internal", "orders-internal", "connect-offsets-internal", "foo-internal"])
def test_internal_suffix_alone_does_not_stop_replication(topic: str) -> None:
    """Kafka 4.3.1's DefaultTopicFilter and isInternalTopic: only MM2 2.x dropped any *.internal/*-internal."""
    assert replicated(topic, topics=DEFAULT_TOPICS)


def test_heartbeats_pass_even_when_the_allowlist_does_not_name_them() -> None:
    only_orders = NameFilter(("orders",))
    assert replicated("heartbeats", topics=only_orders)
    assert replicated("us-east.heartbeats", topics=only_orders)
    assert not replicated("heartbeats", topics=only_orders, heartbeats=False)
    assert not replicated("payments", topics=only_orders)


def test_filter_is_full_match_and_exclude_wins() -> None:
    f = NameFilter(("orders.*", "pay"), ("orders-tmp",))
    assert f.admits("orders") and f.admits("orders-eu") and f.admits("pay")
    assert not f.admits("payments")  # full-string match, not search
    assert not f.admits("orders-tmp")
    assert not f.admits("xorders")


def test_empty_allowlist_replicates_nothing() -> None:
    assert not NameFilter(()).admits("orders")


def test_internal_topics_never_pass_even_if_allowed() -> None:
    assert not replicated("__consumer_offsets", topics=NameFilter(("__.*",)))
    assert not replicated("source.checkpoints.internal")


@pytest.mark.parametrize(
    ("group", "expected"),
    [("app", True), ("console-consumer-123", False), ("connect-sink", False), ("__internal", False)],
)
def test_group_predicate_with_mm2_defaults(group: str, expected: bool) -> None:
    assert should_replicate_group(group, NameFilter((".*",), DEFAULT_GROUPS_EXCLUDE)) is expected
