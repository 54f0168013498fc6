"""Topic creation and config reads in batches: a request per srm.kafka.topics.BATCH topics, not a round
trip per topic, and a failure still names its topic and the ACL it needs."""

from __future__ import annotations

import gc
from collections.abc import Collection
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError

from srm.errors import SrmError
from srm.kafka.clients import list_metadata
from srm.kafka.topics import BATCH, NewTopicSpec, describe_configs_of, ensure_topics, partition_counts
from tests.unit.kafka_futures import done


class Admin:
    """An admin client of a pretend cluster: topics that exist, topics this principal may not create."""

    srm_principal = "User:srm (clusters.east)"
    srm_cluster = "east"
    srm_alias = "east"

    def __init__(self, existing: Collection[str] = (), refused: Collection[str] = ()) -> None:
        self.topics: dict[str, Any] = {name: None for name in existing}
        self.refused = set(refused)
        self.requests: list[list[str]] = []

    def create_topics(self, topics: list[Any], operation_timeout: float = 0) -> dict[str, Future[Any]]:
        self.requests.append([t.topic for t in topics])
        out = {}
        for t in topics:
            if t.topic in self.refused:
                out[t.topic] = done(error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authz failed"))
            elif t.topic in self.topics:
                out[t.topic] = done(error=KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "exists"))
            else:
                self.topics[t.topic] = (t.num_partitions, t.replication_factor, dict(t.config))
                out[t.topic] = done()
        return out

    def describe_configs(self, resources: list[Any]) -> dict[Any, Future[Any]]:
        self.requests.append([r.name for r in resources])
        entry = SimpleNamespace(name="retention.ms", value="60000", source=1, is_read_only=False, is_sensitive=False)
        return {r: done({"retention.ms": entry}) for r in resources}

    def list_topics(self, timeout: float = 0) -> Any:
        return SimpleNamespace(topics={}, brokers={1: None})


def test_a_thousand_topics_are_created_in_a_request_per_batch_and_those_there_already_left_alone() -> None:
    names = [f"west.t{i:04d}" for i in range(1_200)]
    admin = Admin(existing={"west.t0007", "west.t1100"})
    created = ensure_topics(admin, [NewTopicSpec(n, 3, 1, {"cleanup.policy": "compact"}) for n in names])
    assert created == set(names) - {"west.t0007", "west.t1100"}
    assert [len(r) for r in admin.requests] == [BATCH, BATCH, 1_200 - 2 * BATCH]
    assert admin.topics["west.t0000"] == (3, 1, {"cleanup.policy": "compact"})


def test_a_topic_refused_in_a_batch_is_named_with_the_acl_it_needs_and_the_others_are_created() -> None:
    names = [f"west.t{i}" for i in range(10)]
    admin = Admin(refused={"west.t4"})
    with pytest.raises(SrmError) as raised:
        ensure_topics(admin, [NewTopicSpec(n, 1) for n in names])
    message = str(raised.value)
    assert message.startswith("cannot create topic 'west.t4' on east: ")
    assert "User:srm (clusters.east) needs CREATE on TOPIC 'west.t4'" in message
    assert set(admin.topics) == set(names) - {"west.t4"}
    # the batch, then the topics it did not create one at a time, up to the one refused
    assert admin.requests == [names, ["west.t4"]]


def test_the_configs_of_many_topics_are_read_in_a_request_per_batch() -> None:
    names = [f"t{i}" for i in range(BATCH + 1)]
    admin = Admin()
    configs = describe_configs_of(admin, names)
    assert [len(r) for r in admin.requests] == [BATCH, 1]
    assert set(configs) == set(names)
    assert [(c.name, c.value, c.source) for c in configs["t3"]] == [("retention.ms", "60000", "DYNAMIC_TOPIC_CONFIG")]


class ListingClient:
    """A client whose listing notes whether Python's cyclic collector ran meanwhile."""

    srm_alias = "west"

    def __init__(self) -> None:
        self.collector_on: list[bool] = []

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.collector_on.append(gc.isenabled())
        return SimpleNamespace(topics={f"t{i}": SimpleNamespace(partitions={0: None}) for i in range(3)})


def test_a_listing_of_every_topic_is_built_with_the_collector_paused_and_it_runs_again_after() -> None:
    client = ListingClient()
    assert gc.isenabled()
    assert partition_counts(client) == {"t0": 1, "t1": 1, "t2": 1}
    assert client.collector_on == [False]
    assert gc.isenabled()
    gc.disable()  # paused by someone else: left so
    try:
        list_metadata(client)
        assert not gc.isenabled()
    finally:
        gc.enable()
