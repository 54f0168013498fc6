"""The hourly metrics rollup (srm/maintenance/metrics_rollup.py) and what the REST API reads from it.

Real Delta tables in a temporary warehouse: the same irregular rows go into a warehouse that gets
rolled up and into one that stays raw; every metric over windows in whole hours must read the same
from both.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError

from srm.config import load_config
from srm.config.model import Flow
from srm.config.settings import FlowSettings
from srm.maintenance.compaction import maintain
from srm.maintenance.metrics_rollup import GRACE_MARGIN_S, roll_up
from srm.service import metrics
from srm.service.series import Window
from srm.storage.warehouse import (
    CHECKPOINT_METRICS,
    CHECKPOINTS_HOURLY,
    HOUR_MS,
    METRICS,
    METRICS_HOURLY,
    Warehouse,
    rollup_app_id,
)
from tests.helpers import offline_config

H = HOUR_MS
BASE = 1_800_000_000_000 // H * H  # hour 0 of the data
PARTITIONS = [("t1", 0), ("t1", 1), ("t2", 0)]
HOURS = [0, 1, 3, 4, 5, 6, 7]  # hour 2 has no rows
TOPICS: list[dict[str, str]] = [{}, {"topic": "t1", "side": "upstream"}, {"topic": "west.t2", "side": "downstream"}]
WINDOWS = [
    Window(BASE, BASE + 8 * H, 8),  # one-hour samples
    Window(BASE + 17 * 60_000, BASE + 8 * H + 180_000, 3),  # aligned: from hour 0, three-hour samples
    Window(BASE - 2 * H, BASE + 10 * H, 4),
]


def settled_at(hour: int) -> int:
    """A time at which every hour before ``hour`` is past the grace period, and ``hour`` is not."""
    return BASE + hour * H + (FlowSettings().longest_lease_seconds + GRACE_MARGIN_S) * 1000 + 60_000


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    """One flow west->east between clusters where nothing listens; the warehouse in tmp_path."""
    return offline_config(tmp_path)


@pytest.fixture
def flow(config_file: Path) -> Flow:
    return load_config(config_file).flow("west", "east")


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def replication_rows(flow: str, hours: list[int], seed: int) -> list[dict[str, Any]]:
    """A few rows per partition and hour at random times; some without records, latency or lag."""
    rng = np.random.default_rng(seed)
    rows = []
    for hour in hours:
        for topic, partition in PARTITIONS:
            for _ in range(int(rng.integers(1, 5))):
                records = int(rng.integers(0, 50))
                measured = records > 0 and rng.random() > 0.1
                rows.append(
                    {
                        "flow": flow,
                        "topic": topic,
                        "partition": partition,
                        "target_topic": f"west.{topic}",
                        "records": records,
                        "bytes": records * int(rng.integers(100, 2000)),
                        "lag": None if rng.random() < 0.1 else int(rng.integers(0, 1000)),
                        "latency_avg_ms": float(rng.uniform(5, 500)) if measured else None,
                        "record_age_avg_ms": float(rng.uniform(5, 900)) if records and rng.random() > 0.2 else None,
                        "finished_at": at(BASE + hour * H + int(rng.integers(0, H))),
                    }
                )
    return rows


def checkpoint_rows(flow: str, hours: list[int], seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "flow": flow,
            "topic": topic,
            "partition": 0,
            "latency_ms": None if rng.random() < 0.1 else float(rng.uniform(1, 300)),
            "written_at": at(BASE + hour * H + int(rng.integers(0, H))),
        }
        for hour in hours
        for topic in ("t1", "t2")
        for _ in range(int(rng.integers(1, 4)))
    ]


def write(warehouses: list[Warehouse], table: str, rows: list[dict[str, Any]], per_append: int = 7) -> None:
    """``rows`` into each warehouse, a few per append (as leases write them: many small files)."""
    for warehouse in warehouses:
        done = warehouse.version(table, "test") or 0
        for number, first in enumerate(range(0, len(rows), per_append), done + 1):
            warehouse.append(table, rows[first : first + per_append], "test", number)


def fill(warehouses: list[Warehouse], flow: Flow, hours: list[int], seed: int) -> None:
    write(warehouses, METRICS, replication_rows(flow.name, hours, seed))
    write(warehouses, METRICS, replication_rows("east->west", hours, seed + 1))  # another flow's rows
    write(warehouses, CHECKPOINT_METRICS, checkpoint_rows(flow.name, hours, seed + 2))


def responses(warehouse: Warehouse, flow: Flow) -> dict[tuple[str, int, int], dict[str, Any]]:
    return {
        (name, w, t): metrics.series(warehouse, flow, name, window, **topic)
        for name in metrics.CATALOG
        for w, window in enumerate(WINDOWS)
        for t, topic in enumerate(TOPICS)
    }


def assert_same_figures(found: dict[Any, dict[str, Any]], expected: dict[Any, dict[str, Any]]) -> None:
    assert found.keys() == expected.keys()
    for case, response in expected.items():
        got = found[case]
        assert (got["from"], got["to"], got["samples"]) == (response["from"], response["to"], response["samples"])
        assert [p["timestamp"] for p in got["series"]] == [p["timestamp"] for p in response["series"]], case
        assert [p["value"] for p in got["series"]] == pytest.approx([p["value"] for p in response["series"]]), case


def hourly_rows(warehouse: Warehouse, table: str) -> int:
    return len(warehouse.read(table))


def test_long_windows_read_from_the_rollup_give_the_raw_figures_for_every_metric(tmp_path: Path, flow: Flow) -> None:
    rolled, raw = Warehouse(tmp_path / "rolled"), Warehouse(tmp_path / "raw")
    fill([rolled, raw], flow, HOURS, seed=1)
    # Two rows of t1/0 measured at the same moment, the last of hour 4: the larger lag counts, both ways.
    tie = [
        {**replication_rows(flow.name, [4], 9)[0], "finished_at": at(BASE + 5 * H - 1), "lag": lag} for lag in (70, 7)
    ]
    write([rolled, raw], METRICS, tie, per_append=1)

    found = roll_up(rolled, flow, now_ms=settled_at(6))

    assert [(r.table, r.watermark) for r in found] == [
        (METRICS_HOURLY, BASE // H + 6),
        (CHECKPOINTS_HOURLY, BASE // H + 6),
    ]
    assert found[0].rows_read == sum(
        1 for r in rolled.read(METRICS, flow=flow.name) if r["finished_at"] < at(BASE + 6 * H)
    )
    assert_same_figures(responses(rolled, flow), responses(raw, flow))
    # The hours before the watermark came from the hourly table: one row per partition and hour.
    times = metrics.read_arrays(rolled, flow, metrics.metric("record-rate"), WINDOWS[0], None)[0]
    tail = [r for r in rolled.read(METRICS, flow=flow.name) if r["finished_at"] >= at(BASE + 6 * H)]
    assert len(times) == len(PARTITIONS) * len([h for h in HOURS if h < 6]) + len(tail)
    lags = metrics.series(rolled, flow, "replication-records-lag", WINDOWS[0], topic="t1", side="upstream")
    t1_1 = [r for r in rolled.read(METRICS, flow=flow.name, topic="t1", partition=1) if r["lag"] is not None]
    newest = max(
        (r for r in t1_1 if at(BASE + 4 * H) <= r["finished_at"] < at(BASE + 5 * H)), key=lambda r: r["finished_at"]
    )
    assert {"timestamp": BASE + 4 * H, "value": 70 + newest["lag"]} in lags["series"]


def test_a_window_with_samples_of_an_hour_or_more_is_served_in_whole_hours(tmp_path: Path, flow: Flow) -> None:
    warehouse = Warehouse(tmp_path / "warehouse")
    fill([warehouse], flow, HOURS, seed=2)
    asked = Window(BASE + 17 * 60_000, BASE + 8 * H + 180_000, 3)  # samples of ~2.7 h from 00:17
    response = metrics.series(warehouse, flow, "record-rate", asked)
    assert (response["from"], response["to"], response["samples"]) == (BASE, BASE + 9 * H, 3)
    assert [p["timestamp"] for p in response["series"]] == [BASE, BASE + 3 * H, BASE + 6 * H]
    short = metrics.series(warehouse, flow, "record-rate", Window(BASE + 17 * 60_000, BASE + 8 * H, 60))
    assert short["from"] == BASE + 17 * 60_000 and short["samples"] == 60  # 8-minute samples: as asked


def test_rolling_up_twice_or_replaying_a_step_adds_no_rows(tmp_path: Path, flow: Flow) -> None:
    warehouse = Warehouse(tmp_path / "warehouse")
    fill([warehouse], flow, HOURS, seed=3)
    first = roll_up(warehouse, flow, now_ms=settled_at(6))
    stale = DeltaTable(warehouse.path(METRICS_HOURLY))  # a run that read the watermark back then
    rows = hourly_rows(warehouse, METRICS_HOURLY)
    assert first[0].rows_written == rows == len(PARTITIONS) * 5  # hours 0, 1, 3, 4, 5

    again = roll_up(warehouse, flow, now_ms=settled_at(6))
    assert [r.hours for r in again] == [0, 0] and hourly_rows(warehouse, METRICS_HOURLY) == rows

    app = rollup_app_id(flow.name)
    data = DeltaTable(warehouse.path(METRICS_HOURLY)).to_pyarrow_dataset().head(3)
    assert not warehouse.advance(METRICS_HOURLY, data, app, None, BASE // H + 6)  # the first step, replayed
    assert not warehouse.advance(METRICS_HOURLY, data, app, BASE // H + 5, BASE // H + 7)  # from a wrong watermark
    roll_up(warehouse, flow, now_ms=settled_at(8))  # another run moves the watermark on to hour 8
    rows = hourly_rows(warehouse, METRICS_HOURLY)
    # The stale run commits the step it computed: refused, the app id moved since its snapshot.
    with pytest.raises(CommitFailedError):
        commit = CommitProperties(app_transactions=[Transaction(app, BASE // H + 8)])
        write_deltalake(stale, data, mode="append", commit_properties=commit)
    assert hourly_rows(warehouse, METRICS_HOURLY) == rows


def test_hours_after_the_watermark_are_read_from_the_raw_table(tmp_path: Path, flow: Flow) -> None:
    rolled, raw = Warehouse(tmp_path / "rolled"), Warehouse(tmp_path / "raw")
    fill([rolled, raw], flow, HOURS, seed=4)
    roll_up(rolled, flow, now_ms=settled_at(4))
    fill([rolled, raw], flow, [4, 6, 7], seed=5)  # new rows, all at or after the watermark (hour 4)

    assert rolled.version(METRICS_HOURLY, rollup_app_id(flow.name)) == BASE // H + 4
    assert_same_figures(responses(rolled, flow), responses(raw, flow))
    rate = metrics.series(rolled, flow, "record-rate", WINDOWS[0])["series"]
    records_in_hour_7 = sum(
        r["records"] for r in raw.read(METRICS, flow=flow.name) if r["finished_at"] >= at(BASE + 7 * H)
    )
    assert rate[-1] == {"timestamp": BASE + 7 * H, "value": pytest.approx(records_in_hour_7 / 3600)}


def test_rows_that_arrive_within_the_grace_period_are_rolled_up(tmp_path: Path, flow: Flow) -> None:
    rolled, raw = Warehouse(tmp_path / "rolled"), Warehouse(tmp_path / "raw")
    fill([rolled, raw], flow, [0, 1, 3, 4, 5], seed=6)

    # Ten minutes after hour 5 ended, its last lease's rows may still be on their way: not rolled.
    early = roll_up(rolled, flow, now_ms=BASE + 6 * H + 10 * 60_000)
    assert early[0].watermark == BASE // H + 5
    late = {**replication_rows(flow.name, [5], 7)[0], "finished_at": at(BASE + 6 * H - 1), "records": 12_345}
    write([rolled, raw], METRICS, [late])
    later = roll_up(rolled, flow, now_ms=settled_at(6))

    assert later[0].watermark == BASE // H + 6 and later[0].hours == 1
    hour_5 = [r for r in rolled.read(METRICS_HOURLY) if r["hour"] == at(BASE + 5 * H) and r["topic"] == late["topic"]]
    assert sum(r["records"] for r in hour_5 if r["partition"] == late["partition"]) >= 12_345
    assert_same_figures(responses(rolled, flow), responses(raw, flow))


def test_optimize_compacts_the_files_once_an_hour_and_the_figures_stay(tmp_path: Path, flow: Flow) -> None:
    warehouse = Warehouse(tmp_path / "warehouse")
    fill([warehouse], flow, HOURS, seed=8)
    roll_up(warehouse, flow, now_ms=settled_at(6))
    before = responses(warehouse, flow)
    files = {t: len(DeltaTable(warehouse.path(t)).file_uris()) for t in (METRICS, METRICS_HOURLY, CHECKPOINT_METRICS)}
    assert files[METRICS] > 10 and files[CHECKPOINT_METRICS] > 3  # a file per append

    done = {u.table: u for u in maintain(warehouse, now_ms=settled_at(6))}

    for table, count in files.items():
        assert (done[table].files_before, done[table].files_after) == (count, 1), done[table]
        assert len(DeltaTable(warehouse.path(table)).file_uris()) == 1
    assert_same_figures(responses(warehouse, flow), before)
    again = maintain(warehouse, now_ms=settled_at(6) + 60_000)  # the same hour: the tables are done
    assert all(u.skipped for u in again)
    assert not any(u.skipped for u in maintain(warehouse, now_ms=settled_at(7)))  # the next hour: due again
    optimizes = [h for h in DeltaTable(warehouse.path(METRICS)).history() if h["operation"] == "OPTIMIZE"]
    assert len(optimizes) == 1  # the next hour found nothing left to compact


def test_the_maintenance_task_rolls_up_and_compacts_without_any_cluster(config_file: Path, flow: Flow) -> None:
    from srm.airflow.callables import metrics_rollup

    warehouse = Warehouse(load_config(config_file).storage.warehouse)
    now = int(time.time() * 1000)
    rows = [
        {**row, "finished_at": at(now - 5 * H + i * 60_000)}
        for i, row in enumerate(replication_rows(flow.name, [0], 10))
    ]
    write([warehouse], METRICS, rows)  # over the minutes from five hours ago on: settled since

    done = metrics_rollup(str(config_file), "west", "east")  # the clusters' ports answer nothing

    assert done["rolled_hours"][METRICS_HOURLY] >= 4
    assert sum(r["rows"] for r in warehouse.read(METRICS_HOURLY)) == len(rows)
    assert done["maintained"] == [METRICS, METRICS_HOURLY]
    assert len(DeltaTable(warehouse.path(METRICS)).file_uris()) == 1
