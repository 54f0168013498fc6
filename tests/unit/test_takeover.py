"""What a takeover reads from MirrorMaker 2's files and topics, without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from srm.config import load_config
from srm.errors import NotConfiguredError
from srm.operations.takeover import connect_partition, offsets_topic, pair
from tests.helpers import offline_config


def test_the_connect_offsets_topic_is_mm2s_default_or_the_one_the_properties_name(tmp_path: Path) -> None:
    flow = load_config(offline_config(tmp_path)).flow("west", "east")
    properties = tmp_path / "mm2.properties"
    properties.write_text("clusters = west, east\nwest->east.enabled = true\n")
    assert offsets_topic(properties, flow) == "mm2-offsets.west.internal"
    properties.write_text("clusters = west, east\noffset.storage.topic = connect-offsets\n")
    assert offsets_topic(properties, flow) == "connect-offsets"
    properties.write_text("clusters=west,east\noffset.storage.topic=a\nwest->east.offset.storage.topic=b\n")
    assert offsets_topic(properties, flow) == "b"


def test_the_properties_must_use_the_flows_aliases(tmp_path: Path) -> None:
    flow = load_config(offline_config(tmp_path)).flow("west", "east")
    properties = tmp_path / "mm2.properties"
    properties.write_text("clusters = A, east\n")
    with pytest.raises(NotConfiguredError, match=r"clusters = 'A, east' does not name west; the flow west->east"):
        offsets_topic(properties, flow)
    with pytest.raises(NotConfiguredError, match=r"cannot read .*missing.properties"):
        offsets_topic(tmp_path / "missing.properties", flow)


@pytest.mark.parametrize(
    ("key", "wanted"),
    [
        (b'["MirrorSourceConnector",{"cluster":"west","partition":3,"topic":"orders"}]', ("orders", 3)),
        (b'["my-mirror",{"cluster":"west","partition":0,"topic":"a.b"}]', ("a.b", 0)),  # a Connect cluster's name
        (b'["MirrorSourceConnector",{"cluster":"other","partition":3,"topic":"orders"}]', None),
        (b'["MirrorCheckpointConnector",{"group":"g"}]', None),
        (b"not json", None),
        (None, None),
    ],
)
def test_connect_offset_keys_of_the_source_are_read(key: bytes | None, wanted: tuple[str, int] | None) -> None:
    assert connect_partition(key, "west") == wanted


def copies_of(*names: str, start: int = 0) -> list[tuple[int, bytes]]:
    return [(start + n, name.encode()) for n, name in enumerate(names)]


def test_lining_up_pairs_copies_in_order_and_counts_what_mm2_wrote_twice() -> None:
    source = copies_of("a", "b", "c", "d", "e")
    # MM2 copied a, b, c, restarted from its commit after a and copied b, c again, then d
    lined = pair(copies_of("a", "b", "c", "b", "c", "d"), source, earliest=0, floor=1)
    assert (lined.next_offset, lined.copied, lined.duplicated, lined.unmatched) == (4, 4, 2, 0)
    assert [(r.source_first, r.target_first, r.length) for r in lined.runs] == [(0, 0, 3), (3, 5, 1)]


def test_lining_up_survives_originals_gone_from_the_source_and_gaps() -> None:
    # the source lost a, b to retention and c to compaction; its offsets have gaps (markers)
    source = [(2, b"x"), (5, b"d"), (7, b"e"), (9, b"f")]
    lined = pair(copies_of("a", "b", "c", "d", "e"), source, earliest=2, floor=2)
    assert (lined.next_offset, lined.copied, lined.unmatched) == (8, 2, 3)
    assert [(r.source_first, r.target_first, r.length) for r in lined.runs] == [(5, 3, 1), (7, 4, 1)]


def test_mm2s_commit_is_a_floor_copies_removed_from_the_target_are_not_copied_again() -> None:
    source = copies_of("x", "x", "y")  # two identical records: the copy found could be of either
    assert pair(copies_of("x"), source, earliest=0, floor=2).next_offset == 2
    assert pair([], source, earliest=0, floor=3).next_offset == 3
