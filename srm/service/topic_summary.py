"""Per topic of a flow, what it copied in a time window: the Replications page's topic table.

Bounded scans grouped by topic in Arrow: the whole hours of the window that the flow's rollup
already holds come from the hourly table (one row per partition and hour), only the rest (the
window's first partial hour, and the hours after the rollup's watermark) from the raw table; both
carry sums and weights, so the figures are the same either way. Lag is not here: the live lag per
topic comes from Kafka with the flow's health (srm.operations.health), as ``srm-control status`` shows it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from srm.config.model import Flow
from srm.service.metrics import TABLES
from srm.service.series import Window
from srm.storage.warehouse import HOUR_MS, METRICS, METRICS_HOURLY, Warehouse, in_window, rollup_app_id

# Per table: (records, bytes, latency, its weight, record age, its weight, time of the row).
RAW = ("records", "bytes", "latency_avg_ms", "records", "record_age_avg_ms", "records", "finished_at")
HOURLY = ("records", "bytes", "latency_avg_ms", "latency_records", "record_age_avg_ms", "record_age_records", "lag_at")
SUMS = ("records", "bytes", "latency_weight", "latency_weighted", "record_age_weight", "record_age_weighted")


def topic_summary(warehouse: Warehouse, flow: Flow, window: Window) -> list[dict[str, Any]]:
    """Every topic the flow copied in ``window``, by source topic: records, bytes, their rates per
    second of the window, record-weighted mean latency and record age, and the last copy's time."""
    import pyarrow as pa

    parts = []
    raw = TABLES.dataset(warehouse.path(METRICS))
    hourly, watermark = TABLES.snapshot(warehouse.path(METRICS_HOURLY), rollup_app_id(flow.name))
    first_hour = -(-window.start_ms // HOUR_MS)  # the first whole hour inside the window
    rolled_to = min(watermark or 0, window.end_ms // HOUR_MS)  # whole hours the rollup holds
    raw_from = window.start_ms
    if hourly is not None and rolled_to > first_hour:
        parts.append(_read(hourly, flow, "hour", HOURLY, (first_hour * HOUR_MS, rolled_to * HOUR_MS)))
        parts.append(_read(raw, flow, "finished_at", RAW, (raw_from, first_hour * HOUR_MS)))
        raw_from = rolled_to * HOUR_MS
    parts.append(_read(raw, flow, "finished_at", RAW, (raw_from, window.end_ms)))
    found_parts = [p for p in parts if p is not None]
    rows = pa.concat_tables(found_parts) if found_parts else None
    if rows is None or rows.num_rows == 0:
        return []
    grouped = rows.group_by(["topic", "target_topic"], use_threads=False).aggregate(
        [*((c, "sum") for c in SUMS), ("last_at", "max")]
    )
    seconds = (window.end_ms - window.start_ms) / 1000
    found = []
    for row in grouped.to_pylist():
        found.append(
            {
                "topic": row["topic"],
                "remote_topic": row["target_topic"],
                "records": row["records_sum"],
                "bytes": row["bytes_sum"],
                "record_rate": row["records_sum"] / seconds,
                "byte_rate": row["bytes_sum"] / seconds,
                "latency_avg_ms": _mean(row["latency_weighted_sum"], row["latency_weight_sum"]),
                "record_age_avg_ms": _mean(row["record_age_weighted_sum"], row["record_age_weight_sum"]),
                "last_copied_at": _iso(row["last_at_max"]),
            }
        )
    return sorted(found, key=lambda t: t["topic"])


def _read(dataset: Any, flow: Flow, time: str, columns: tuple[str, ...], span: tuple[int, int]) -> Any:
    """The rows of ``flow`` in ``span`` (start, end ms) of one table, as the common columns (None if none)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    start_ms, end_ms = span
    if dataset is None or end_ms <= start_ms:
        return None
    condition = in_window(flow.name, time, start_ms, end_ms)
    wanted = sorted({"topic", "target_topic", *columns})
    table = dataset.to_table(columns=wanted, filter=condition, use_threads=False)
    records, size, latency, latency_weight, age, age_weight, last_at = columns
    out = {"topic": table["topic"], "target_topic": table["target_topic"]}
    out["records"] = table[records].fill_null(0).cast(pa.int64())
    out["bytes"] = table[size].fill_null(0).cast(pa.int64())
    for name, value, weight in (("latency", latency, latency_weight), ("record_age", age, age_weight)):
        # Rows without a measurement (none copied) weigh nothing in the mean.
        weights = pc.if_else(table[value].is_valid(), table[weight].fill_null(0), 0).cast(pa.int64())
        out[f"{name}_weight"] = weights
        out[f"{name}_weighted"] = pc.multiply(table[value].fill_null(0.0), weights.cast(pa.float64()))
    out["last_at"] = table[last_at].cast(pa.timestamp("ms", tz="UTC"))
    return pa.table(out)


def _mean(total: float, weight: int) -> float | None:
    return None if not weight else total / weight


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat(timespec="seconds")
