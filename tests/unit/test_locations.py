from pathlib import Path

import pytest

from srm.storage import locations
from srm.storage.warehouse import Warehouse


@pytest.mark.parametrize(
    ("base", "joined"),
    [
        ("s3a://bucket/wh", "s3a://bucket/wh/us-west_to_us-east"),
        ("s3a://bucket/wh/", "s3a://bucket/wh/us-west_to_us-east"),
        (
            "abfss://box@account.dfs.core.windows.net/srm",
            "abfss://box@account.dfs.core.windows.net/srm/us-west_to_us-east",
        ),
        ("hdfs://namenode:8020/srm", "hdfs://namenode:8020/srm/us-west_to_us-east"),
        ("file:///var/srm", "file:///var/srm/us-west_to_us-east"),
        ("/var/srm", "/var/srm/us-west_to_us-east"),
    ],
)
def test_a_joined_location_keeps_its_scheme_and_authority(base: str, joined: str) -> None:
    assert locations.join(base, "us-west_to_us-east") == joined


def test_only_paths_and_file_uris_are_on_this_machine(tmp_path: Path) -> None:
    assert locations.local_path(str(tmp_path)) == tmp_path
    assert locations.local_path(f"file://{tmp_path}") == tmp_path
    assert locations.local_path("s3a://bucket/wh") is None
    assert locations.local_path("file://otherhost/wh") is None


def test_the_warehouse_writes_and_reads_through_a_file_uri(tmp_path: Path) -> None:
    warehouse = Warehouse(f"file://{tmp_path}/wh")
    assert warehouse.path("data_loss") == f"file://{tmp_path}/wh/data_loss"
    row = {
        "flow": "a->b",
        "topic": "t",
        "partition": 0,
        "first_offset": 0,
        "end_offset": 5,
        "records": 5,
        "reason": "retention",
        "policy": "continue",
        "detected_at": None,
    }
    assert warehouse.append("data_loss", [row], "test", 1)
    assert not warehouse.append("data_loss", [row], "test", 1)  # the same version again is skipped
    assert (tmp_path / "wh" / "data_loss" / "_delta_log").is_dir()
    assert [(r["first_offset"], r["records"]) for r in warehouse.read("data_loss", flow="a->b")] == [(0, 5)]
