"""Hourly rollups of a flow's metrics, so the REST API reads long windows without a full scan.

``replication_metrics`` gets one row per batch (or lease) and source partition: a month of one-minute
batches of 100 partitions is 4.3 M rows. Its hourly table holds one row per partition and hour, the
checkpoint table's one row per topic and hour, each with what makes the API's figures exact when
hours are combined again: sums, averages with their weights, the newest lag with its time
(:mod:`srm.service.metrics` maps every metric onto both tables).

A flow's rollup moves forward hour by hour. Its watermark (the version of app id ``rollup:<flow>``
in the hourly table, ``srm.storage.warehouse``) is the first hour not rolled up: every row of the flow before
it is in the hourly table, the API reads that hour and later ones from the raw table. Each step reads
the raw rows of the hours after the watermark (the flow and time range pushed down into the Delta
scan), aggregates them in Arrow and appends them with the next watermark in one commit, checked
against the watermark it started from: a retry, a replay or a concurrent run never adds an hour twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from srm.config.model import Flow
from srm.storage.warehouse import (
    CHECKPOINT_METRICS,
    CHECKPOINTS_HOURLY,
    HOUR_MS,
    METRICS,
    METRICS_HOURLY,
    Warehouse,
    _schemas,
    in_window,
    rollup_app_id,
)

log = logging.getLogger(__name__)

# A row is stamped with the end of its batch or lease (finished_at; a checkpoint row with the time
# its checkpoint was written) and reaches the table later: a Spark job returns when its last task
# does, so a task that ended early waits for the others (up to a lease, task.lease.seconds), then the
# driver's accounting thread writes the rows in batch order (end offsets looked up, a Delta commit
# each, behind any batch still queued; seconds, more behind a slow object store); a checkpoint pass
# appends its rows when both directions and the group sync are done. An hour is rolled up once it
# ended a lease plus this margin ago; a row that arrives later still is only in the raw table, and
# windows served from the rollup miss it.
GRACE_MARGIN_S = 15 * 60
# Hours per step: bounds what one step holds in memory (a day of one flow's rows: 2,880 leases of
# 30 s per partition, ~100 bytes each in Arrow) and keeps the steps of a first rollup over a long
# history few.
STEP_HOURS = 24


@dataclass(frozen=True)
class Rollup:
    """How one raw table rolls up into its hourly table."""

    raw: str
    hourly: str
    time: str  # the raw column whose hour a row belongs to
    columns: tuple[str, ...]  # the raw columns the hourly rows come from
    aggregate: Callable[[Any], Any]  # raw rows (an Arrow table) -> the hourly columns but flow, by name


@dataclass(frozen=True)
class Rolled:
    """What one rollup of one flow did."""

    table: str
    hours: int  # hours the watermark moved
    rows_read: int
    rows_written: int
    watermark: int | None  # the first hour not rolled up (hours since the epoch)
    note: str = ""

    def __str__(self) -> str:
        upto = "nothing rolled up yet" if self.watermark is None else f"rolled up to {_iso(self.watermark)}"
        line = f"{self.table}: {self.hours} hour(s) rolled up ({self.rows_read} rows -> {self.rows_written}), {upto}"
        return f"{line}; {self.note}" if self.note else line


def replication_hours(rows: Any) -> Any:
    """Hourly rows of ``replication_metrics`` rows (topic, partition, target_topic, finished_at,
    records, bytes, latency_avg_ms, record_age_avg_ms, lag): sums where the API sums, averages
    weighted by the records that have the value, and per partition the newest lag and its time (of
    rows measured at the same moment, the larger lag, as the API's gauge picks)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    keys = ["topic", "partition", "target_topic", "hour"]
    records = rows["records"].fill_null(0)
    columns = {k: rows[k] for k in keys[:3]}
    columns.update(hour=pc.floor_temporal(rows["finished_at"], unit="hour"), records=rows["records"])
    columns.update(bytes=rows["bytes"], lag=rows["lag"])
    columns["lag_at"] = pc.if_else(rows["lag"].is_valid(), rows["finished_at"], None)
    for name in ("latency", "record_age"):
        value = rows[f"{name}_avg_ms"]
        columns[f"{name}_records"] = pc.if_else(value.is_valid(), records, None)
        columns[f"{name}_weighted"] = pc.multiply(value, records.cast(pa.float64()))
        columns[f"{name}_avg_ms"] = value
    ordered = pa.table(columns).sort_by([(k, "ascending", "at_start") for k in (*keys, "lag_at", "lag")])
    sums = ["records", "bytes", "latency_records", "latency_weighted", "record_age_records", "record_age_weighted"]
    grouped = ordered.group_by(keys, use_threads=False).aggregate(
        [
            ("hour", "count"),
            *((c, "sum") for c in sums),
            ("latency_avg_ms", "mean"),
            ("record_age_avg_ms", "mean"),
            ("lag", "last"),  # ordered input (use_threads=False): the newest measured lag
            ("lag_at", "last"),
        ]
    )
    out = {k: grouped[k] for k in keys}
    out.update(rows=grouped["hour_count"], records=grouped["records_sum"], bytes=grouped["bytes_sum"])
    for name in ("latency", "record_age"):
        weight = grouped[f"{name}_records_sum"]
        weighted = pc.divide(grouped[f"{name}_weighted_sum"], weight.cast(pa.float64()))
        # Rows that carry a value but no records weigh nothing: their plain mean stands in, so the
        # hour still counts as measured and adds nothing to a weighted sum, as in the raw table.
        out[f"{name}_avg_ms"] = pc.if_else(pc.greater(weight, 0), weighted, grouped[f"{name}_avg_ms_mean"])
        out[f"{name}_records"] = weight
    out.update(lag=grouped["lag_last"], lag_at=grouped["lag_at_last"])
    return out


def checkpoint_hours(rows: Any) -> Any:
    """Hourly rows of ``checkpoint_metrics`` rows (topic, written_at, latency_ms): the mean latency
    and how many rows it averages."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.table(
        {
            "topic": rows["topic"],
            "hour": pc.floor_temporal(rows["written_at"], unit="hour"),
            "latency": rows["latency_ms"],
        }
    )
    grouped = table.group_by(["topic", "hour"], use_threads=False).aggregate(
        [("latency", "mean"), ("latency", "count")]
    )
    return {
        "topic": grouped["topic"],
        "hour": grouped["hour"],
        "latency_avg_ms": grouped["latency_mean"],
        "latency_rows": grouped["latency_count"],
    }


REPLICATED = ("topic", "partition", "target_topic", "finished_at", "records", "bytes", "lag")
REPLICATION = Rollup(
    METRICS, METRICS_HOURLY, "finished_at", (*REPLICATED, "latency_avg_ms", "record_age_avg_ms"), replication_hours
)
CHECKPOINTS = Rollup(
    CHECKPOINT_METRICS, CHECKPOINTS_HOURLY, "written_at", ("topic", "written_at", "latency_ms"), checkpoint_hours
)
ROLLUPS = (REPLICATION, CHECKPOINTS)


def roll_up(warehouse: Warehouse, flow: Flow, now_ms: int | None = None) -> list[Rolled]:
    """Roll up every complete hour of ``flow`` after its watermarks that ended over the grace
    period before ``now_ms`` (default: now), in both hourly tables."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    settled = (now_ms - (flow.settings.longest_lease_seconds + GRACE_MARGIN_S) * 1000) // HOUR_MS
    return [roll_up_table(warehouse, flow.name, rollup, settled) for rollup in ROLLUPS]


def roll_up_table(warehouse: Warehouse, flow: str, rollup: Rollup, settled: int) -> Rolled:
    """Roll up the hours of ``flow`` in ``rollup.raw`` from its watermark to ``settled`` (an hour
    index, excluded)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError, TableNotFoundError

    try:
        raw = DeltaTable(warehouse.path(rollup.raw)).to_pyarrow_dataset()
    except TableNotFoundError:
        return Rolled(rollup.hourly, 0, 0, 0, None, f"no {rollup.raw} table yet")
    app = rollup_app_id(flow)
    done = warehouse.version(rollup.hourly, app)
    origin = done if done is not None else _first_hour(raw, flow, rollup.time)
    if origin is None:
        return Rolled(rollup.hourly, 0, 0, 0, None, f"{flow} has no rows in {rollup.raw} yet")
    hours = read = written = 0
    step = origin  # hours from origin to step are read and empty, not committed yet
    while step < settled:
        end = min(step + STEP_HOURS, settled)
        rows = _read(raw, flow, rollup, step, end)
        if rows.num_rows == 0 and end < settled:  # the next commit moves the watermark over these hours
            step = end
            continue
        hourly = _hourly_table(rollup, flow, rows)
        try:
            moved = warehouse.advance(rollup.hourly, hourly, app, done, end)
        except CommitFailedError:  # a concurrent commit under the same app id
            moved = False
        if not moved:
            note = f"another run of the rollup of {flow} moved the watermark first; the next run goes on from it"
            return Rolled(rollup.hourly, hours, read, written, warehouse.version(rollup.hourly, app), note)
        hours, read, written = hours + end - origin, read + rows.num_rows, written + hourly.num_rows
        done = origin = step = end
    return Rolled(rollup.hourly, hours, read, written, done)


def _first_hour(raw: Any, flow: str, column: str) -> int | None:
    """The hour of the flow's oldest raw row, or None without any."""
    import pyarrow as pa
    import pyarrow.compute as pc

    stamps = raw.to_table(columns=[column], filter=pc.field("flow") == flow, use_threads=False)[column]
    oldest = pc.min(stamps.cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64())).as_py()
    return None if oldest is None else int(oldest) // HOUR_MS


def _read(raw: Any, flow: str, rollup: Rollup, start: int, end: int) -> Any:
    condition = in_window(flow, rollup.time, start * HOUR_MS, end * HOUR_MS)
    # Single-threaded: see Warehouse.read (a threaded scan aborts the interpreter at exit).
    return raw.to_table(columns=list(rollup.columns), filter=condition, use_threads=False)


def _hourly_table(rollup: Rollup, flow: str, rows: Any) -> Any:
    import pyarrow as pa

    schema = _schemas()[rollup.hourly]
    columns = rollup.aggregate(rows)
    size = len(next(iter(columns.values())))
    columns["flow"] = pa.repeat(pa.scalar(flow, pa.string()), size)
    return pa.table([columns[f.name].cast(f.type) for f in schema], schema=schema)


def _iso(hour: int) -> str:
    return time.strftime("%Y-%m-%d %H:00 UTC", time.gmtime(hour * HOUR_MS // 1000))
