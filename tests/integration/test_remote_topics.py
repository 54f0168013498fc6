"""Remote topics created for many source topics at once are held by their leaders before the flow
writes to them: a broker names new partitions in its metadata before it has created their logs,
and a produce in between is refused for good (UNKNOWN_TOPIC_OR_PART)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from srm.config import SrmConfig
from srm.errors import ClusterUnreachableError
from srm.kafka import clients
from srm.kafka.partitions import await_served
from srm.kafka.topics import NewTopicSpec, ensure_topics
from srm.replication.remote_topics import RemoteTopics
from tests.replication import make_env

TOPICS, PARTITIONS = 20, 100


def not_served(admin: object, partitions: list[tuple[str, int]]) -> dict[str, int]:
    """Of ``partitions``, how many their leaders refuse a ListOffsets for, by error name."""
    request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
    refused: dict[str, int] = {}
    for future in admin.list_offsets(request, request_timeout=30).values():  # type: ignore[attr-defined]
        try:
            future.result(timeout=60)
        except KafkaException as exc:
            refused[exc.args[0].name()] = refused.get(exc.args[0].name(), 0) + 1
    return refused


def test_remote_topics_created_at_once_are_served_when_ensure_returns(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    prefix = unique("many")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [f"{prefix}-.*"]}])
    flow = env.flow()
    names = [f"{prefix}-{i:02d}" for i in range(TOPICS)]
    west, east = clients.admin_client(env.west), clients.admin_client(env.east)
    remotes = [flow.policy.format_remote_topic(env.west.alias, name) for name in names]
    ensure_topics(west, [NewTopicSpec(name, PARTITIONS) for name in names])
    try:
        RemoteTopics(flow, env.east, west, east).ensure(dict.fromkeys(names, PARTITIONS))
        fresh = clients.admin_client(env.east)  # no metadata cached: asks the leaders now
        assert not_served(fresh, [(r, p) for r in remotes for p in range(PARTITIONS)]) == {}
    finally:
        for admin, topics in ((west, names), (east, remotes)):
            for future in admin.delete_topics(topics, operation_timeout=60).values():
                future.result()


def test_a_partition_no_leader_serves_ends_the_wait_naming_it(kafka: SrmConfig, unique: Callable[[str], str]) -> None:
    admin = clients.admin_client(kafka.clusters[1])
    missing = unique("never-created")
    with pytest.raises(ClusterUnreachableError) as raised:
        await_served(admin, [(missing, 0), (missing, 1)], timeout_s=2)
    message = str(raised.value)
    assert message.startswith(f"2 new partition(s) not served by their leaders on {kafka.clusters[1].alias} "), message
    assert f" after 2 s ({missing}[0], {missing}[1]: " in message, message
