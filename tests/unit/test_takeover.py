"""What a takeover reads from MirrorMaker 2's files and topics, without a cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from srm.config import load_config
from srm.errors import NotConfiguredError
from srm.takeover import connect_partition, offsets_topic
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
