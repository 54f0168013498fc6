"""The metrics SRM's REST API serves, read from the warehouse's Delta tables.

Reads are bounded: only the columns a metric needs, and only rows of the flow, the topic and the
window, pushed down into the Delta scan (delta-rs skips files whose statistics fall outside).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Literal

from srm.config.model import Flow
from srm.service.series import Combine, Window, sample_arrays, summary
from srm.warehouse import CHECKPOINT_METRICS, METRICS, Warehouse

TopicSide = Literal["upstream", "downstream"]


@dataclass(frozen=True)
class Metric:
    """How one metric comes out of a warehouse table."""

    table: str
    column: str
    combine: Combine
    unit: str
    time: str = "finished_at"
    weight: str | None = None
    key: tuple[str, ...] = ()

    def columns(self) -> list[str]:
        return sorted({self.time, self.column, *([self.weight] if self.weight else []), *self.key})


CATALOG: dict[str, Metric] = {
    "record-rate": Metric(METRICS, "records", "rate", "records/s"),
    "byte-rate": Metric(METRICS, "bytes", "rate", "bytes/s"),
    "replication-latency-ms": Metric(METRICS, "latency_avg_ms", "weighted", "ms", weight="records"),
    "record-age-ms": Metric(METRICS, "record_age_avg_ms", "weighted", "ms", weight="records"),
    "replication-records-lag": Metric(METRICS, "lag", "gauge", "records", key=("topic", "partition")),
    "checkpoint-latency-ms": Metric(CHECKPOINT_METRICS, "latency_ms", "mean", "ms", time="written_at"),
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
        self._open: dict[str, tuple[Any, int, Any]] = {}
        self._lock = threading.Lock()

    def dataset(self, path: str) -> Any | None:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        with self._lock:
            try:
                if path in self._open:
                    table, version, dataset = self._open[path]
                    table.update_incremental()
                else:
                    table, version, dataset = DeltaTable(path), -1, None
            except TableNotFoundError:
                return None
            if table.version() != version:
                dataset = table.to_pyarrow_dataset()
                self._open[path] = (table, table.version(), dataset)
            return dataset


TABLES = Tables()


def read_arrays(
    warehouse: Warehouse, flow: Flow, spec: Metric, window: Window, topic: tuple[str, str] | None
) -> tuple[Any, Any, Any, Any]:
    """Times (ms), key codes, weights and values of ``spec`` for ``flow`` (and ``topic``: column,
    value) inside ``window``, as numpy arrays."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    dataset = TABLES.dataset(warehouse.path(spec.table))
    if dataset is None:
        empty = np.array([], dtype=np.int64)
        return empty, empty, empty.astype(float), empty.astype(float)
    start = pa.scalar(window.start_ms, pa.timestamp("ms", tz="UTC"))
    end = pa.scalar(window.end_ms, pa.timestamp("ms", tz="UTC"))
    condition = (pc.field("flow") == flow.name) & (pc.field(spec.time) >= start) & (pc.field(spec.time) < end)
    condition &= pc.field(spec.column).is_valid()
    if topic is not None:
        condition &= pc.field(topic[0]) == topic[1]
    # Single-threaded: see Warehouse.read (a threaded scan aborts the interpreter at exit).
    table = dataset.to_table(columns=spec.columns(), filter=condition, use_threads=False)
    # delta-rs stores timestamps in microseconds: in milliseconds first, then as numbers.
    times = table[spec.time].cast(pa.timestamp("ms", tz="UTC")).cast(pa.int64()).to_numpy()
    values = table[spec.column].cast(pa.float64()).to_numpy()
    weights = table[spec.weight].fill_null(0).cast(pa.float64()).to_numpy() if spec.weight else np.ones(len(times))
    keys = np.zeros(len(times), dtype=np.int64)
    if spec.key:
        parts = [table[k].cast(pa.string()) for k in spec.key]
        joined = pc.binary_join_element_wise(*parts, "/")
        keys = joined.dictionary_encode().combine_chunks().indices.to_numpy().astype(np.int64)
    return times, keys, weights, values


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
