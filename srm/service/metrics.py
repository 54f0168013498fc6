"""The metrics SRM's REST API serves, read from the warehouse's Delta tables.

Reads are bounded: only the columns a metric needs, and only rows of the flow, the topic and the
window, pushed down into the Delta scan (delta-rs skips files whose statistics fall outside). A
window whose samples span an hour or more is served in whole hours: the hours before the flow's
rollup watermark come from the hourly tables (srm.maintenance.metrics_rollup), one row per
partition and hour, and only the rest from the raw tables. Both give the same figures.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

from srm.config.model import Flow
from srm.service.series import Combine, Window, in_hours, sample_arrays, summary
from srm.storage.warehouse import (
    CHECKPOINT_METRICS,
    CHECKPOINTS_HOURLY,
    HOUR_MS,
    METRICS,
    METRICS_HOURLY,
    Warehouse,
    in_window,
    rollup_app_id,
)

TopicSide = Literal["upstream", "downstream"]


@dataclass(frozen=True)
class Source:
    """Where a metric's rows are in one table: the value, its time, its weight, its key."""

    table: str
    column: str
    time: str
    weight: str | None = None
    key: tuple[str, ...] = ()

    def columns(self) -> list[str]:
        return sorted({self.time, self.column, *([self.weight] if self.weight else []), *self.key})


@dataclass(frozen=True)
class Metric:
    """How one metric comes out of the warehouse: its raw table and its hourly rollup."""

    combine: Combine
    unit: str
    raw: Source
    hourly: Source

    @property
    def table(self) -> str:
        return self.raw.table


PARTITION = ("topic", "partition")


def _replicated(column: str, combine: Combine, unit: str, weight: str | None = None) -> Metric:
    """A metric of replication_metrics whose hourly column has the same name."""
    raw = Source(METRICS, column, "finished_at", "records" if weight else None)
    return Metric(combine, unit, raw, Source(METRICS_HOURLY, column, "hour", weight))


CATALOG: dict[str, Metric] = {
    "record-rate": _replicated("records", "rate", "records/s"),
    "byte-rate": _replicated("bytes", "rate", "bytes/s"),
    "replication-latency-ms": _replicated("latency_avg_ms", "weighted", "ms", weight="latency_records"),
    "record-age-ms": _replicated("record_age_avg_ms", "weighted", "ms", weight="record_age_records"),
    "replication-records-lag": Metric(
        "gauge",
        "records",
        Source(METRICS, "lag", "finished_at", key=PARTITION),
        Source(METRICS_HOURLY, "lag", "lag_at", key=PARTITION),  # the hour's newest lag, at its own time
    ),
    "checkpoint-latency-ms": Metric(
        "mean",
        "ms",
        Source(CHECKPOINT_METRICS, "latency_ms", "written_at"),
        Source(CHECKPOINTS_HOURLY, "latency_avg_ms", "hour", weight="latency_rows"),
    ),
}


class UnknownMetric(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown metric {name!r}; known: {', '.join(sorted(CATALOG))}")


def metric(name: str) -> Metric:
    if name not in CATALOG:
        raise UnknownMetric(name)
    return CATALOG[name]


def topic_filter(flow: Flow, table: str, topic: str, side: TopicSide) -> tuple[str, str]:
    """Column and value that select ``topic`` of ``flow`` in ``table``. Checkpoint rows name the
    upstream topic only: a downstream name is mapped back through the flow's replication policy."""
    if side == "upstream":
        return "topic", topic
    if table == METRICS:
        return "target_topic", topic
    return "topic", flow.policy.upstream_topic(topic) or topic


class Tables:
    """Open Delta tables, kept between requests: each read catches up with new commits only, and the
    pyarrow dataset (file list and statistics) is rebuilt only when the table has a new version."""

    def __init__(self) -> None:
        # path -> (table, its version, dataset, app id -> transaction version, all of that version)
        self._open: dict[str, tuple[Any, int, Any, dict[str, int | None]]] = {}
        self._lock = threading.Lock()

    def dataset(self, path: str) -> Any | None:
        return self.snapshot(path)[0]

    def snapshot(self, path: str, app_id: str | None = None) -> tuple[Any | None, int | None]:
        """The table's dataset (None if there is no table) and, of the same table version, the
        version appended under ``app_id`` (None if none)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        with self._lock:
            try:
                if path in self._open:
                    table, version, dataset, apps = self._open[path]
                    table.update_incremental()
                else:
                    table, version, dataset, apps = DeltaTable(path), -1, None, {}
            except TableNotFoundError:
                return None, None
            if table.version() != version:
                dataset, apps = table.to_pyarrow_dataset(), {}
                self._open[path] = (table, table.version(), dataset, apps)
            if app_id is None:
                return dataset, None
            if app_id not in apps:
                apps[app_id] = table.transaction_version(app_id)
            return dataset, apps[app_id]


TABLES = Tables()


def read_arrays(
    warehouse: Warehouse, flow: Flow, spec: Metric, window: Window, topic: tuple[str, str] | None
) -> tuple[Any, Any, Any, Any]:
    """Times (ms), key codes, weights and values of ``spec`` for ``flow`` (and ``topic``: column,
    value) inside ``window``, as numpy arrays. A window in whole hours reads the hours before the
    flow's rollup watermark from the hourly table, the others from the raw table."""
    import numpy as np
    import pyarrow as pa

    parts, start = [], window.start_ms
    if window.whole_hours:
        hourly, watermark = TABLES.snapshot(warehouse.path(spec.hourly.table), rollup_app_id(flow.name))
        rolled = min(window.end_ms, watermark * HOUR_MS) if watermark is not None else start
        if hourly is not None and rolled > start:
            parts.append(_scan(hourly, flow, spec.hourly, (start, rolled), topic))
            start = rolled
    raw = TABLES.dataset(warehouse.path(spec.raw.table)) if start < window.end_ms else None
    if raw is not None:
        parts.append(_scan(raw, flow, spec.raw, (start, window.end_ms), topic))
    if not parts:
        empty = np.array([], dtype=np.int64)
        return empty, empty, empty.astype(float), empty.astype(float)
    table = pa.concat_tables(parts)
    keys = np.zeros(table.num_rows, dtype=np.int64)
    if spec.raw.key:
        keys = table["key"].dictionary_encode().combine_chunks().indices.to_numpy().astype(np.int64)
    times, weights, values = (table[c].to_numpy() for c in ("time", "weight", "value"))
    return times, keys, weights, values


def _scan(dataset: Any, flow: Flow, source: Source, span: tuple[int, int], topic: tuple[str, str] | None) -> Any:
    """The rows of ``source`` in ``span`` (ms, end excluded) as an Arrow table of time (ms), weight,
    value and, for a keyed metric, key."""
    import pyarrow as pa
    import pyarrow.compute as pc

    condition = in_window(flow.name, source.time, *span) & pc.field(source.column).is_valid()
    if topic is not None:
        condition &= pc.field(topic[0]) == topic[1]
    # Single-threaded: see Warehouse.read (a threaded scan aborts the interpreter at exit).
    table = dataset.to_table(columns=source.columns(), filter=condition, use_threads=False)
    rows = table.num_rows
    columns = {
        # delta-rs stores timestamps in microseconds: in milliseconds first, then as numbers.
        "time": table[source.time].cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()),
        "weight": table[source.weight].fill_null(0).cast(pa.float64()) if source.weight else pa.repeat(1.0, rows),
        "value": table[source.column].cast(pa.float64()),
    }
    if source.key:
        columns["key"] = pc.binary_join_element_wise(*(table[k].cast(pa.string()) for k in source.key), "/")
    return pa.table(columns)


def series(
    warehouse: Warehouse,
    flow: Flow,
    name: str,
    window: Window,
    *,
    topic: str | None = None,
    side: TopicSide = "upstream",
) -> dict[str, Any]:
    """SRM's response for one metric of a flow (or one of its topics): the samples and aggregates."""
    spec = metric(name)
    window = in_hours(window) or window  # the response's from, to and samples say which window it is
    where = topic_filter(flow, spec.table, topic, side) if topic is not None else None
    points = sample_arrays(read_arrays(warehouse, flow, spec, window, where), window, spec.combine)
    return {
        "metric": name,
        "unit": spec.unit,
        "source": flow.source,
        "target": flow.target,
        **({"topic": topic, "topicSide": side} if topic is not None else {}),
        "from": window.start_ms,
        "to": window.end_ms,
        "samples": window.samples,
        "series": [{"timestamp": t, "value": v} for t, v in points],
        **summary(points),
    }


def topic_known(warehouse: Warehouse, flow: Flow, topic: str, side: TopicSide) -> bool:
    """Whether the flow ever replicated ``topic`` (its metrics table has a row of it)."""
    import pyarrow.compute as pc

    column, value = topic_filter(flow, METRICS, topic, side)
    dataset = TABLES.dataset(warehouse.path(METRICS))
    if dataset is None:
        return False
    condition = (pc.field("flow") == flow.name) & (pc.field(column) == value)
    return bool(dataset.head(1, columns=[column], filter=condition, use_threads=False).num_rows > 0)
