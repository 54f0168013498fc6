"""Records survive a real broker byte for byte, and MM2's record types round-trip through real topics."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.config.model import Cluster
from srm.errors import RecordFormatError
from srm.kafka import clients
from srm.kafka.partitions import read_to_end
from srm.kafka.topics import ensure_topic
from srm.mm2.records import Checkpoint, Heartbeat, OffsetSync
from tests.helpers import produce, read_all

pytestmark = pytest.mark.integration

COMPACTED = {"cleanup.policy": "compact"}
# The records below carry timestamps of November 2023, older than the brokers' default retention:
# the local brokers' retention check (every 10 s) would delete them before they are read back.
KEPT = {"retention.ms": "-1"}


RECORDS: list[dict[str, Any]] = [
    {
        "key": b"k1",
        "value": b"v1",
        "partition": 0,
        "timestamp": 1_700_000_000_000,
        "headers": [("h1", b"a"), ("h2", b"\x00\xff"), ("h1", b"again")],
    },
    {"key": None, "value": b"no key", "partition": 1, "timestamp": 1_700_000_000_001},
    {"key": b"k1", "value": None, "partition": 0, "timestamp": 1_700_000_000_002},  # tombstone
    {
        "key": b"\x00\x01binary",
        "value": bytes(range(256)),
        "partition": 2,
        "timestamp": 1_700_000_000_003,
        "headers": [("empty", b""), ("null", None)],
    },
]


@pytest.mark.parametrize("index", [0, 1])
def test_records_with_headers_round_trip_byte_for_byte(
    kafka: SrmConfig, unique: Callable[[str], str], index: int
) -> None:
    cluster = kafka.clusters[index]
    topic = unique("roundtrip")
    assert ensure_topic(clients.admin_client(cluster), topic, 3, config=KEPT)
    produce(cluster, topic, RECORDS)
    got = sorted(read_all(cluster, topic, len(RECORDS)), key=lambda m: m.timestamp()[1])
    assert len(got) == len(RECORDS)
    for sent, message in zip(RECORDS, got, strict=True):
        assert message.partition() == sent["partition"]
        assert message.key() == sent["key"]
        assert message.value() == sent["value"]
        assert message.timestamp() == (1, sent["timestamp"])  # 1 = CreateTime
        assert (message.headers() or None) == (sent.get("headers") or None)


def test_ensure_topic_is_idempotent(kafka: SrmConfig, unique: Callable[[str], str]) -> None:
    admin = clients.admin_client(kafka.clusters[0])
    topic = unique("twice")
    assert ensure_topic(admin, topic, 2) is True
    assert ensure_topic(admin, topic, 2) is False


def test_read_to_end_reads_several_partitions_at_once_each_in_order(
    kafka: SrmConfig, unique: Callable[[str], str]
) -> None:
    cluster = kafka.clusters[0]
    topic = unique("ends")
    ensure_topic(clients.admin_client(cluster), topic, 5)
    # Partition 3 stays empty: its end is its start.
    produce(cluster, topic, [{"value": f"{p}-{i}".encode(), "partition": p} for i in range(4) for p in (0, 1, 2, 4)])
    consumer = clients.reader(cluster, unique("ends-reader"))
    try:
        read = [(m.partition(), m.value().decode()) for m in read_to_end(consumer, topic, range(5))]
        one = [m.value().decode() for m in read_to_end(consumer, topic, 2)]
    finally:
        consumer.close()
    assert sorted(read) == sorted((p, f"{p}-{i}") for i in range(4) for p in (0, 1, 2, 4))
    for partition in (0, 1, 2, 4):
        assert [v for p, v in read if p == partition] == [f"{partition}-{i}" for i in range(4)]
    assert one == [f"2-{i}" for i in range(4)]  # one partition, as before


def test_mm2_record_types_round_trip_through_compacted_topics(kafka: SrmConfig, unique: Callable[[str], str]) -> None:
    source, target = kafka.clusters[0], kafka.clusters[1]
    policy = kafka.flow(source.alias, target.alias).policy
    prefix = unique("mm2")
    cases: list[tuple[Cluster, str, list[Any]]] = [
        (
            target,
            f"{prefix}.{policy.heartbeats_topic()}",
            [Heartbeat(source.alias, target.alias, 1_763_700_000_000)],
        ),
        (
            target,
            f"{prefix}.{policy.checkpoints_topic(source.alias)}",
            [Checkpoint("orders-app", f"{source.alias}.orders", p, 100 + p, 40 + p, "") for p in range(3)],
        ),
        (
            source,
            f"{prefix}.{policy.offset_syncs_topic(target.alias)}",
            [OffsetSync("orders", 0, 10, 7), OffsetSync("orders", 1, 0, 0)],
        ),
    ]
    for cluster, topic, records in cases:
        assert ensure_topic(clients.admin_client(cluster), topic, 1, config=COMPACTED)
        produce(cluster, topic, [r.as_produce_kwargs() for r in records])
        messages = read_all(cluster, topic, len(records))
        decoded = [type(records[0]).from_message(m) for m in messages]
        assert decoded == records
        assert {m.partition() for m in messages} == {0}


def test_garbage_in_an_internal_topic_names_topic_partition_offset(
    kafka: SrmConfig, unique: Callable[[str], str]
) -> None:
    cluster = kafka.clusters[1]
    topic = unique("garbage") + ".checkpoints.internal"
    ensure_topic(clients.admin_client(cluster), topic, 1, config=COMPACTED)
    good = Checkpoint("g", "t", 0, 1, 1)
    produce(cluster, topic, [good.as_produce_kwargs(), {"key": b"\x00", "value": b"junk", "partition": 0}])
    messages = read_all(cluster, topic, 2)
    assert Checkpoint.from_message(messages[0]) == good
    with pytest.raises(RecordFormatError, match=f"at topic '{topic}' partition 0 offset 1: checkpoint key too short"):
        Checkpoint.from_message(messages[1])
