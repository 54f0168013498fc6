"""MM2 wire formats: the test vectors of mm2-compat.md section 2, and garbage handling."""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest

from srm.errors import RecordFormatError
from srm.mm2.records import (
    RUNS_PER_RECORD,
    Checkpoint,
    Heartbeat,
    OffsetRunsRecord,
    OffsetSync,
    RecordLocation,
)
from srm.mm2.wire import WireReader


def hx(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def test_heartbeat_vector() -> None:
    hb = Heartbeat("source-1", "target-2", 1234567890)
    assert hb.key() == hx("0008 736f757263652d31 0008 7461726765742d32")
    assert hb.value() == hx("0000 00000000499602d2")
    assert Heartbeat.decode(hb.key(), hb.value()) == hb


def test_checkpoint_vector() -> None:
    cp = Checkpoint("group-1", "topic-2", 3, 4, 5, "metadata-6")
    assert cp.key() == hx("0007 67726f75702d31 0007 746f7069632d32 00000003")
    assert cp.value() == hx("0000 0000000000000004 0000000000000005 000a 6d657461646174612d36")
    assert Checkpoint.decode(cp.key(), cp.value()) == cp


def test_checkpoint_vector_with_empty_metadata() -> None:
    cp = Checkpoint("consumer-group-1", "primary.test-topic-1", 3, 100, 42, "")
    assert cp.value() == hx("0000 0000000000000064 000000000000002a 0000")
    assert Checkpoint.decode(cp.key(), cp.value()).metadata == ""


def test_offset_sync_vector() -> None:
    sync = OffsetSync("topic-1", 2, 3, 4)
    assert sync.key() == hx("0007 746f7069632d31 00000002")
    assert sync.value() == hx("0000000000000003 0000000000000004")
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


def test_readers_ignore_trailing_bytes() -> None:
    hb = Heartbeat("a", "b", 7)
    assert Heartbeat.decode(hb.key() + b"\x00\x01", hb.value() + b"extra") == hb


def test_unicode_and_large_offsets_round_trip() -> None:
    cp = Checkpoint("grüppe-✓", "région.tópico", 2**31 - 1, 2**63 - 1, 0, "m")
    assert Checkpoint.decode(cp.key(), cp.value()) == cp


def test_produce_kwargs_target_partition_zero() -> None:
    kwargs = OffsetSync("t", 5, 1, 2).as_produce_kwargs()
    assert kwargs["partition"] == 0
    assert kwargs["key"] == OffsetSync("t", 5, 1, 2).key()


WHERE = RecordLocation("us-west.checkpoints.internal", 0, 42)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (hx("0007 67726f75702d31"), hx("0000"), "field topic length needs 2 bytes"),
        (hx("0010 6162"), hx("0000"), "field group needs 16 bytes"),
        (
            Checkpoint("g", "t", 0, 1, 2).key(),
            hx("0001 0000000000000001 0000000000000002 0000"),
            "unsupported version 1",
        ),
        (None, hx("0000"), "checkpoint key is null"),
        (hx("ffff"), hx("0000"), "null string"),
        (hx("0002 fffe 0001 61 00000000"), hx("0000"), "not valid UTF-8"),
    ],
)
def test_garbage_raises_clear_error_with_location(key: bytes | None, value: bytes, message: str) -> None:
    with pytest.raises(RecordFormatError) as err:
        Checkpoint.decode(key, value, WHERE)
    text = str(err.value)
    assert message in text
    assert "topic 'us-west.checkpoints.internal' partition 0 offset 42" in text


def test_garbage_without_location_still_explains() -> None:
    with pytest.raises(RecordFormatError, match="cannot decode offset-sync record: offset-sync value too short"):
        OffsetSync.decode(OffsetSync("t", 0, 1, 2).key(), b"\x00")


def test_oversized_string_is_refused_on_encode() -> None:
    with pytest.raises(ValueError, match="exceeds the Kafka STRING limit"):
        Heartbeat("x" * 40000, "b", 1).key()


def test_a_transaction_with_many_runs_is_written_as_several_records_under_a_megabyte() -> None:
    runs = tuple((2 * i, i, 1) for i in range(2 * RUNS_PER_RECORD + 1))  # every other record skipped
    records = OffsetRunsRecord.batches("orders", 3, "id", 2 * len(runs), runs)
    assert [len(r.runs) for r in records] == [RUNS_PER_RECORD, RUNS_PER_RECORD, 1]
    assert max(len(r.value()) for r in records) < 1_000_000
    decoded = [OffsetRunsRecord.decode(r.key(), r.value()) for r in records]
    assert {run for r in decoded for run in r.runs} == set(runs)
    assert {(r.topic, r.partition, r.topic_id, r.next_offset) for r in decoded} == {("orders", 3, "id", len(runs) * 2)}
    # nothing copied: the progress alone, in one record without runs
    (alone,) = OffsetRunsRecord.batches("orders", 3, "id", 7, ())
    assert alone.runs == () and alone.next_offset == 7


def _checked(record_type: type[Any], key: bytes, value: bytes) -> Any:
    """What the field-by-field reader makes of the bytes (the record, or the error's message)."""
    try:
        kind = record_type.KIND
        return record_type._parse(WireReader(key, f"{kind} key"), WireReader(value, f"{kind} value"))
    except (ValueError, struct.error) as exc:
        return str(exc)


@pytest.mark.parametrize(
    "record",
    [
        Checkpoint("group-1", "src.topic-ä", 3, 2**40, 7, "meta"),
        Checkpoint("g", "t", 0, 0, 0, ""),
        OffsetRunsRecord("topic-ä", 5, "id-1", 99, ((1, 2, 3), (4, 6, 5))),
        OffsetRunsRecord("t", 0, "", 7, ()),
    ],
)
def test_the_records_read_in_bulk_decode_in_one_go_as_the_checked_reader_does(record: Any) -> None:
    """Checkpoints and history records have a fast decode; every cut, a wrong version, a negative
    length or broken UTF-8 gives what the field-by-field reader gives: the record, or its error."""
    kind = type(record)
    key, value = record.key(), record.value()
    assert kind._unpack(key, value) == record == kind.decode(key, value)
    assert kind.decode(key, value + b"\x00\x01") == record  # trailing bytes are ignored
    variants = [(key[:n], value) for n in range(len(key))] + [(key, value[:n]) for n in range(len(value))]
    variants += [(key, b"\x00\x01" + value[2:]), (b"\xff\xff" + key[2:], value), (key[:2] + b"\xff" + key[3:], value)]
    for k, v in variants:
        expected = _checked(kind, k, v)
        if isinstance(expected, str):
            with pytest.raises(RecordFormatError, match=re.escape(expected)):
                kind.decode(k, v)
        else:
            assert kind.decode(k, v) == expected
