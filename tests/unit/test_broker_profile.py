"""bench.broker_profile's sorting of a JFR recording's samples into the parts of a broker's work."""

from __future__ import annotations

from typing import Any

import pytest

from bench.broker_profile import ALLOCATION, BACKGROUND, CPU, part_of, samples, shares

PRODUCE = ["kafka/server/ReplicaManager.appendRecords", "kafka/server/KafkaApis.handleProduceRequest"]
VERIFY = ["kafka/cluster/Partition.maybeStartTransactionVerification", *PRODUCE]
APPEND_AFTER_VERIFY = [
    "kafka/server/ReplicaManager.appendRecords",
    "kafka/server/ReplicaManager.postVerificationCallback$1",
]


@pytest.mark.parametrize(
    ("frames", "thread", "part"),
    [
        (PRODUCE, "data-plane-kafka-request-handler-1", "Produce"),
        # A transactional Produce: the partition's verification, then the append in a callback.
        (VERIFY, "data-plane-kafka-request-handler-0", "transactions: partition verification"),
        (APPEND_AFTER_VERIFY, "data-plane-kafka-request-handler-0", "Produce"),
        (["java/util/HashMap.put"], "AddPartitionsToTxnSenderThread-1", "transactions: partition verification"),
        (
            ["kafka/server/KafkaApis.handleWriteTxnMarkersRequest"],
            "data-plane-kafka-request-handler-1",
            "transactions: markers",
        ),
        (["java/nio/HeapByteBuffer.<init>"], "TxnMarkerSenderThread-1", "transactions: markers"),
        (["kafka/server/KafkaApis.handleEndTxnRequest"], "data-plane-kafka-request-handler-0", "transactions: EndTxn"),
        (["kafka/server/KafkaApis.handleAddPartitionsToTxnRequest"], "x", "transactions: AddPartitionsToTxn"),
        (["kafka/server/KafkaApis.handleFetchRequest"], "data-plane-kafka-request-handler-0", "Fetch"),
        (["java/util/ArrayList.add"], "ExpirationReaper-1-Fetch", "Fetch"),
        (["kafka/server/KafkaApis.handleTopicMetadataRequest"], "data-plane-kafka-request-handler-0", "Metadata"),
        (
            ["java/nio/ByteBuffer.allocate"],
            "data-plane-kafka-network-thread-1-ListenerName(PLAINTEXT)-PLAINTEXT-0",
            "network threads (every request)",
        ),
        (
            ["java/util/concurrent/ArrayBlockingQueue.poll"],
            "data-plane-kafka-request-handler-1",
            "request handlers, other",
        ),
        (["org/apache/kafka/storage/internals/log/LogCleaner.clean"], "kafka-log-cleaner-thread-0", BACKGROUND),
        ([], "", BACKGROUND),
    ],
)
def test_each_sample_goes_to_the_part_of_the_work_it_belongs_to(frames: list[str], thread: str, part: str) -> None:
    assert part_of(frames, thread) == part


def event(kind: str, frames: list[str], thread: str, key: str) -> dict[str, Any]:
    trace = {
        "frames": [{"method": {"type": {"name": f.rsplit(".", 1)[0]}, "name": f.rsplit(".", 1)[1]}} for f in frames]
    }
    return {"type": kind, "values": {"stackTrace": trace, key: {"javaName": thread}, "weight": 6_400_000_000}}


def test_shares_count_samples_per_event_type_not_their_weight() -> None:
    handler = "data-plane-kafka-request-handler-0"
    document = {
        "recording": {
            "events": [
                event(CPU, PRODUCE, handler, "sampledThread"),
                event(CPU, VERIFY, handler, "sampledThread"),
                event(CPU, APPEND_AFTER_VERIFY, handler, "sampledThread"),
                event(CPU, ["kafka/server/KafkaApis.handleEndTxnRequest"], handler, "sampledThread"),
                event(ALLOCATION, ["java/util/HashMap.resize"], "transaction-log-manager-0", "eventThread"),
                event(ALLOCATION, PRODUCE, handler, "eventThread"),
                event(ALLOCATION, PRODUCE, handler, "eventThread"),
            ]
        }
    }
    out = shares(samples(document))
    assert out["cpu_samples"] == 4
    assert out["cpu_pct"] == {
        "Produce": 50.0,
        "transactions: partition verification": 25.0,
        "transactions: EndTxn": 25.0,
    }
    assert out["allocation_samples"] == 3
    assert out["allocation_pct"] == {"Produce": 66.7, "transactions: coordinator, other": 33.3}


def test_a_recording_without_samples_has_no_shares() -> None:
    assert shares(samples({"recording": {"events": []}})) == {
        "cpu_samples": 0,
        "cpu_pct": {},
        "allocation_samples": 0,
        "allocation_pct": {},
    }
