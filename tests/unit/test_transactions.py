"""The transaction coordinator's log read as a client: Kafka's record formats (versions 0 and 1), which
of its partitions holds a transactional id, and how a partition's latest transactions were decided."""

from __future__ import annotations

import struct

import pytest

from srm.errors import RecordFormatError
from srm.kafka.hanging import left_open
from srm.kafka.transactions import TxnLogEntry, TxnStatus, coordinator_partition, decode, outcomes

TP = ("orders", 3)


def key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return struct.pack(">hh", 0, len(raw)) + raw


def uvarint(number: int) -> bytes:
    out = bytearray()
    while number >= 0x80:
        out.append(number & 0x7F | 0x80)
        number >>= 7
    return bytes(out + bytes([number]))


def value_v0(status: int, partitions: dict[str, list[int]], producer: tuple[int, int] = (7, 2)) -> bytes:
    body = struct.pack(">hqhib", 0, producer[0], producer[1], 60_000, status)
    body += struct.pack(">i", len(partitions))
    for topic, ids in partitions.items():
        body += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", len(ids))
        body += b"".join(struct.pack(">i", p) for p in ids)
    return body + struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000)


def value_v1(status: int, partitions: dict[str, list[int]], producer: tuple[int, int] = (7, 2)) -> bytes:
    body = struct.pack(">hqhib", 1, producer[0], producer[1], 60_000, status)
    body += uvarint(len(partitions) + 1)
    for topic, ids in partitions.items():
        body += uvarint(len(topic) + 1) + topic.encode() + uvarint(len(ids) + 1)
        body += b"".join(struct.pack(">i", p) for p in ids)
        body += uvarint(1) + uvarint(5) + uvarint(2) + b"\x00\x01"  # a tagged field nobody knows yet
    body += struct.pack(">qq", 1_700_000_000_500, 1_700_000_000_000)
    # PreviousProducerId (tag 0) and ClientTransactionVersion (tag 2), as Kafka 4 writes them
    return body + uvarint(2) + uvarint(0) + uvarint(8) + struct.pack(">q", 6) + uvarint(2) + uvarint(2) + b"\x00\x02"


def entry(transactional_id: str, status: TxnStatus, *partitions: tuple[str, int], producer: int = 7) -> TxnLogEntry:
    return TxnLogEntry(transactional_id, producer, 0, status, frozenset(partitions), 2, 1)


def test_a_transactional_id_is_where_kafka_puts_it() -> None:
    # Utils.abs(id.hashCode()) % partitions; "hello".hashCode() is 99162322, and
    # "polygenelubricants".hashCode() is Integer.MIN_VALUE, which Utils.abs masks to 0
    assert coordinator_partition("hello", 50) == 99162322 % 50 == 22
    assert coordinator_partition("polygenelubricants", 50) == 0
    assert coordinator_partition("", 10) == 0
    assert coordinator_partition("é", 50) == 233 % 50  # hashed over UTF-16 units, not UTF-8 bytes


@pytest.mark.parametrize("encode", [value_v0, value_v1], ids=["version 0", "version 1 (flexible)"])
def test_a_prepared_commit_names_its_producer_and_every_partition(encode: object) -> None:
    assert callable(encode)
    value = encode(TxnStatus.PREPARE_COMMIT, {"orders": [3, 1], "srm-offset-syncs.west.internal": [0]})
    transactional_id, found = decode(key("srm-replicate.west.east.4.1"), value)
    assert transactional_id == "srm-replicate.west.east.4.1"
    assert found == TxnLogEntry(
        "srm-replicate.west.east.4.1",
        7,
        2,
        TxnStatus.PREPARE_COMMIT,
        frozenset({("orders", 3), ("orders", 1), ("srm-offset-syncs.west.internal", 0)}),
        1_700_000_000_500,
        1_700_000_000_000,
    )


def test_a_completed_transaction_holds_no_partitions_and_a_tombstone_no_entry() -> None:
    _, done = decode(key("t"), value_v1(TxnStatus.COMPLETE_ABORT, {}))
    assert done is not None and done.status is TxnStatus.COMPLETE_ABORT and done.partitions == frozenset()
    assert decode(key("t"), None) == ("t", None)


def test_records_of_another_format_are_refused_saying_what_and_where() -> None:
    with pytest.raises(RecordFormatError, match=r"__transaction_state key of version 1: only version 0"):
        decode(struct.pack(">hh", 1, 1) + b"t", None)
    with pytest.raises(RecordFormatError, match=r"value of 'txn-a'.*field partition needs 4 bytes"):
        decode(key("txn-a"), value_v0(TxnStatus.ONGOING, {"orders": [3]})[:-18])
    with pytest.raises(RecordFormatError, match=r"value of version 9 for 'txn-a'"):
        decode(key("txn-a"), struct.pack(">h", 9) + b"\x00" * 30)
    with pytest.raises(RecordFormatError, match=r"'txn-a': unknown status 12"):
        decode(key("txn-a"), value_v0(12, {}))


def test_a_partitions_latest_completed_transaction_per_id_is_its_outcome() -> None:
    log = [
        entry("a", TxnStatus.ONGOING, TP),
        entry("a", TxnStatus.PREPARE_COMMIT, TP, ("orders", 0)),
        entry("a", TxnStatus.COMPLETE_COMMIT),
        entry("a", TxnStatus.ONGOING, ("orders", 0)),  # later transactions elsewhere leave it as it was
        entry("a", TxnStatus.PREPARE_ABORT, ("orders", 0)),
        entry("b", TxnStatus.PREPARE_COMMIT, TP, producer=9),
        entry("b", TxnStatus.COMPLETE_COMMIT, producer=9),
        entry("b", TxnStatus.ONGOING, TP, producer=9),  # open again there: its coordinator decides it
        entry("c", TxnStatus.PREPARE_EPOCH_FENCE, TP),
        entry("c", TxnStatus.PREPARE_ABORT, TP),
        entry("c", TxnStatus.COMPLETE_ABORT),
        entry("d", TxnStatus.PREPARE_COMMIT, ("orders", 0)),
        entry("e", TxnStatus.PREPARE_COMMIT, TP),  # its markers are still being written
    ]
    found = outcomes(log, TP)
    assert {name: o.result for name, o in found.items()} == {"a": "commit", "c": "abort"}
    assert (found["a"].producer_id, found["a"].started_ms, found["a"].decided_ms) == (7, 1, 2)


def test_what_a_fenced_epoch_left_open_is_ended_once_and_only_where_its_producer_holds_the_partition() -> None:
    other = ("orders", 0)
    log = [
        entry("e1.0", TxnStatus.PREPARE_ABORT, TP, other, ("history", 0)),  # decided, markers skipped
        entry("e1.0", TxnStatus.COMPLETE_ABORT),
        entry("e1.0.alt", TxnStatus.PREPARE_COMMIT, ("orders", 5), producer=8),
        entry("e1.0.alt", TxnStatus.COMPLETE_COMMIT, producer=8),
        entry("e1.1", TxnStatus.EMPTY, producer=9),  # its transaction there compacted away
    ]
    # TP and the history held by e1.0's producer, orders[5] by one not of the epoch (a local
    # application's open transaction on a prefixless flow's topic), orders[7] by e1.1's producer
    holding = {TP: 7, ("history", 0): 7, ("orders", 5): 42, ("orders", 7): 9}
    ended, unknown = left_open(log, holding)
    assert [(o.transactional_id, o.result, o.partitions) for o in ended] == [
        ("e1.0", "abort", frozenset({TP, other, ("history", 0)}))  # once, over every partition it had
    ]
    assert unknown == {("orders", 7): 9}  # named in the log, not ended blindly: its outcome is unknown
    # e1.0's transaction there is not the one held: e1.0.alt's producer holds it, its log has none there
    assert left_open(log, {other: 8}) == ([], {other: 8})


def test_a_clusters_connection_settings_reach_kafka_python_under_its_names() -> None:
    from pydantic import SecretStr

    from srm.config.model import Cluster
    from srm.kafka.hanging import protocol_settings

    plain = Cluster(alias="east", bootstrap_servers="b1:9092,b2:9092", producer={"linger.ms": "5"})
    assert protocol_settings(plain) == {"bootstrap_servers": ["b1:9092", "b2:9092"]}  # tuning left out
    secured = Cluster(
        alias="east",
        bootstrap_servers="b1:9093",
        client={
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "srm",
            "sasl.password": SecretStr("s3cret"),
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.endpoint.identification.algorithm": "none",
        },
    )
    assert protocol_settings(secured) == {
        "bootstrap_servers": ["b1:9093"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "srm",
        "sasl_plain_password": "s3cret",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_check_hostname": False,
    }


def test_a_security_setting_kafka_python_lacks_is_refused_by_name_never_by_value() -> None:
    from pydantic import SecretStr

    from srm.config.model import Cluster
    from srm.errors import SrmError
    from srm.kafka.hanging import protocol_settings

    cluster = Cluster(
        alias="east", bootstrap_servers="b1:9093", client={"sasl.oauthbearer.client.secret": SecretStr("x9")}
    )
    with pytest.raises(SrmError, match=r"cluster east: sasl.oauthbearer.client.secret has no equivalent") as err:
        protocol_settings(cluster)
    assert "x9" not in str(err.value)
