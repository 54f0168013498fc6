"""Remote topics created for many source topics at once are held by their leaders before the flow
writes to them: a broker names new partitions in its metadata before it has created their logs,
and a produce in between is refused for good (UNKNOWN_TOPIC_OR_PART)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from srm.config import SrmConfig
from srm.errors import ClusterUnreachableError
from srm.kafka import clients
from srm.kafka.partitions import await_served
from srm.kafka.topics import NewTopicSpec, ensure_topics
from srm.replication import remote_topics as remote_topics_module
from srm.replication.progress import Progress
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


class ListCalls:
    """A real admin client that counts its metadata requests."""

    def __init__(self, admin: Any) -> None:
        self.admin, self.calls = admin, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.admin, name)

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        return self.admin.list_topics(*args, **kwargs)


def test_prepared_remote_topics_are_served_and_known_ready_without_another_request(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """What a continuous run does when its watcher sees a new topic: the remote topic is made while
    the lease ends (prepare); the next lease finds it ready (``ready``, which spares it the source's
    metadata), and ensure() asks the target nothing more."""
    name = unique("prepared")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [name]}])
    flow = env.flow()
    west, east = clients.admin_client(env.west), ListCalls(clients.admin_client(env.east))
    remote = flow.policy.format_remote_topic(env.west.alias, name)
    ensure_topics(west, [NewTopicSpec(name, 3)])
    # As a watcher finds it: served by its leader (asked for its configs before, it was once unknown).
    await_served(west, [(name, p) for p in range(3)])
    remote_topics = RemoteTopics(flow, env.east, west, east)
    try:
        assert not remote_topics.ready({name: 3})
        remote_topics.prepare({name: 3})
        assert remote_topics.ready({name: 3}) and not remote_topics.ready({name: 4})
        assert not_served(clients.admin_client(env.east), [(remote, p) for p in range(3)]) == {}
        before = east.calls
        remote_topics.ensure({name: 3})
        assert east.calls == before
    finally:
        west.delete_topics([name], operation_timeout=60)[name].result()
        east.delete_topics([remote], operation_timeout=60)[remote].result()


def test_prepare_leaves_a_remote_topic_deleted_under_the_flow_to_the_lease(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A remote topic the flow copied into (its progress is journaled) and that was deleted: what
    the run does about it (stop, or create it again and record the loss) belongs to a lease's start,
    not to the watcher ending the lease before."""
    name = unique("deleted-under")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [name]}])
    flow = env.flow()
    west, east = clients.admin_client(env.west), clients.admin_client(env.east)
    remote = flow.policy.format_remote_topic(env.west.alias, name)
    ensure_topics(west, [NewTopicSpec(name, 2)])
    journaled = {(name, p): Progress(10, "an-old-topic-id", journaled=True) for p in range(2)}
    monkeypatch.setattr(remote_topics_module, "read_flow_progress", lambda *args: dict(journaled))
    handled: list[dict[Any, Progress]] = []
    remote_topics = RemoteTopics(flow, env.east, west, east, handled.append)
    try:
        remote_topics.prepare({name: 2})
        assert handled == [] and not remote_topics.ready({name: 2})
        assert remote not in east.list_topics(timeout=10).topics
        remote_topics.ensure({name: 2})  # the run's handler is told (on_data_loss: continue makes it again)
        assert handled == [journaled] and remote_topics.ready({name: 2})
        assert not_served(clients.admin_client(env.east), [(remote, p) for p in range(2)]) == {}
    finally:
        west.delete_topics([name], operation_timeout=60)[name].result()
        east.delete_topics([remote], operation_timeout=60)  # made by ensure(), unless the test failed before
