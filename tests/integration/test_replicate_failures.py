"""What users see when things go wrong: lost source records, oversized records, a dead cluster."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from srm.config import SrmConfig, load_config
from srm.errors import ClusterUnreachableError, DataLossError, ReplicationError, TopicConflictError
from srm.kafka import clients
from srm.kafka.topics import ensure_topic, partition_counts
from srm.storage.warehouse import DATA_LOSS, METRICS
from tests.conftest import free_ports
from tests.helpers import produce
from tests.integration.test_replicate_copy import alter_topic
from tests.replication import (
    contents,
    count_records,
    make_env,
    replicate,
    sequence_report,
    sequenced,
    without_offsets,
)

pytestmark = pytest.mark.integration


def delete_records(cluster: Any, topic: str, partition: int, before: int) -> None:
    from confluent_kafka import TopicPartition

    admin = clients.admin_client(cluster)
    for future in admin.delete_records([TopicPartition(topic, partition, before)]).values():
        future.result(30)


def test_records_gone_before_copy_are_reported_then_fail_or_continue(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("gap")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 1)
    produce(env.west, topic, sequenced(1, 100))
    replicate(spark, env)
    produce(env.west, topic, sequenced(1, 100, start=100))
    delete_records(env.west, topic, 0, 150)  # as retention would: offsets 100..149 are gone, never copied
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)

    with pytest.raises(DataLossError) as err:
        replicate(spark, env)
    assert f"topic '{topic}' partition 0: offsets 100..149 (50 record(s)) were removed from the source" in str(
        err.value
    )
    assert "on_data_loss: fail" in str(err.value) and "on_data_loss: continue" in str(err.value)
    assert sum(len(r) for r in contents(env.east, remote).values()) == 100  # nothing after the gap copied
    [loss] = env.warehouse.read(DATA_LOSS, topic=topic)
    assert (loss["first_offset"], loss["end_offset"], loss["records"], loss["policy"]) == (100, 150, 50, "fail")

    env.rewrite(on_data_loss="continue")
    replicate(spark, env)
    target = contents(env.east, remote)
    expected = {0: [s for s in range(200) if not 100 <= s < 150]}
    assert sequence_report(target, expected) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    assert len(target[0]) == 150
    losses = sorted(env.warehouse.read(DATA_LOSS, topic=topic), key=lambda r: r["detected_at"])
    assert [(r["policy"], r["first_offset"], r["end_offset"]) for r in losses] == [
        ("fail", 100, 150),
        ("continue", 100, 150),
    ]


def test_record_too_large_names_the_record_and_the_setting(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("big")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 1)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    ensure_topic(clients.admin_client(env.east), remote, 1, config={"max.message.bytes": "2000"})
    records = [
        {"key": f"k{i}".encode(), "value": (b"x" * (6000 if i == 10 else 100)), "partition": 0} for i in range(16)
    ]
    produce(env.west, topic, records)

    with pytest.raises(ReplicationError) as err:
        replicate(spark, env)
    message = str(err.value)
    assert f"record too large for the target: topic '{topic}' partition 0 offset 10" in message
    assert f"Raise max.message.bytes of topic '{remote}'" in message

    alter_topic(clients.admin_client(env.east), remote, {"max.message.bytes": "10000"})
    replicate(spark, env)  # resumes where it stopped: every record exactly once
    assert without_offsets(contents(env.east, remote)) == without_offsets(contents(env.west, topic))


def test_unreachable_cluster_is_named(spark: Any, kafka: SrmConfig, tmp_path: Path) -> None:
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east"}])
    data = yaml.safe_load(env.path.read_text())
    dead = f"127.0.0.1:{free_ports(1)[0]}"
    data["clusters"][env.east.alias]["bootstrap.servers"] = dead
    env.path.write_text(yaml.safe_dump(data, sort_keys=False))
    env.config = load_config(env.path)
    with pytest.raises(ClusterUnreachableError) as err:
        replicate(spark, env)
    assert f"cluster {env.east.alias} ({dead}) did not answer within 15 s" in str(err.value)


def test_at_least_once_mode_copies_everything(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("alo")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "exactly_once": False}])
    ensure_topic(clients.admin_client(env.west), topic, 4)
    produce(env.west, topic, sequenced(4, 2000))
    replicate(spark, env)
    produce(env.west, topic, sequenced(4, 400, start=2000))
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    assert without_offsets(contents(env.east, remote)) == without_offsets(contents(env.west, topic))
    assert sum(m["records"] for m in env.warehouse.read(METRICS, topic=topic)) == 2400


def test_start_latest_copies_only_what_comes_after(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("latest")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "start": "latest"}])
    ensure_topic(clients.admin_client(env.west), topic, 2)
    produce(env.west, topic, sequenced(2, 50))
    replicate(spark, env)  # starts at the end: nothing copied, but the position is kept on the target
    produce(env.west, topic, sequenced(2, 30, start=50))
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    expected = {p: [s for s in range(50, 80) if s % 2 == p] for p in range(2)}
    assert sequence_report(contents(env.east, remote), expected) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    assert sum(len(r) for r in contents(env.east, remote).values()) == 30


def test_start_timestamp(spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]) -> None:
    topic = unique("since")
    records = sequenced(1, 100)
    cutoff = records[60]["timestamp"]
    since = datetime.fromtimestamp(cutoff / 1000, UTC).isoformat()
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "start": since}])
    ensure_topic(clients.admin_client(env.west), topic, 1)
    produce(env.west, topic, records)
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    assert sequence_report(contents(env.east, remote), {0: list(range(60, 100))})["missing"] == 0
    assert sum(len(r) for r in contents(env.east, remote).values()) == 40


def test_recreated_source_topic_is_reported(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    import time

    topic = unique("recreated")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    admin = clients.admin_client(env.west)
    ensure_topic(admin, topic, 1)
    produce(env.west, topic, sequenced(1, 100))
    replicate(spark, env)
    for future in admin.delete_topics([topic]).values():
        future.result(30)
    deadline = time.monotonic() + 30
    while not ensure_topic(admin, topic, 1):  # deletion completes asynchronously
        assert time.monotonic() < deadline, "the topic could not be created again"
        time.sleep(0.5)
    produce(env.west, topic, sequenced(1, 30, start=100))

    with pytest.raises(DataLossError) as err:
        replicate(spark, env)
    assert (
        f"topic '{topic}' partition 0: offsets from 100 on of the old topic were lost when it was deleted and recreated"
        in str(err.value)
    )

    env.rewrite(on_data_loss="continue")
    replicate(spark, env)
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    target = contents(env.east, remote)
    assert sequence_report(target, {0: list(range(130))}) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    reasons = {r["policy"]: r["reason"] for r in env.warehouse.read(DATA_LOSS, topic=topic)}
    assert set(reasons) == {"fail", "continue"} and all("deleted and recreated" in r for r in reasons.values())


def test_existing_target_topic_with_fewer_partitions_stops_the_flow(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("conflict")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    ensure_topic(clients.admin_client(env.west), topic, 4)
    produce(env.west, topic, sequenced(4, 40))
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    ensure_topic(clients.admin_client(env.east), remote, 2, config={"cleanup.policy": "compact"})
    with pytest.raises(TopicConflictError) as err:
        replicate(spark, env)
    assert f"topic '{remote}' already exists on {env.east.alias} with partition count 2, expected at least 4" in str(
        err.value
    )
    assert count_records(env.east, remote) == 0  # nothing was written anywhere
    assert partition_counts(clients.admin_client(env.east))[remote] == 2  # and the topic was not altered


def test_offset_syncs_on_the_target_are_written_in_the_transactions(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    from srm.mm2.records import OffsetSync
    from tests.helpers import read_all

    topic = unique("synctarget")
    env = make_env(
        kafka,
        tmp_path,
        [{"source": "west", "target": "east", "topics": [topic], "offset-syncs.topic.location": "target"}],
    )
    ensure_topic(clients.admin_client(env.west), topic, 1)
    produce(env.west, topic, sequenced(1, 50))
    replicate(spark, env)
    syncs_topic = env.flow().policy.offset_syncs_topic(env.west.alias)  # mm2-offset-syncs.<source>.internal
    assert syncs_topic not in partition_counts(clients.admin_client(env.west))
    # the flow also carries `heartbeats` (other tests' DAG runs emit into the session's): only `topic` here
    found = [OffsetSync.from_message(m) for m in read_all(env.east, syncs_topic, 10**6, timeout_s=3)]
    syncs = [s for s in found if s.topic == topic]
    # offset.lag.max (100) is not reached in 50 records: only the first gets a sync, as MM2 does
    assert [(s.topic, s.upstream_offset, s.downstream_offset) for s in syncs] == [(topic, 0, 0)]
