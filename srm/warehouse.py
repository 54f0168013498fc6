"""The warehouse: Delta tables written with delta-rs, appended idempotently.

Tables (one folder each under the warehouse root):

- ``replication_metrics``: one row per micro-batch and source partition.
- ``offset_sync_history``: every offset run the data path committed (the exact sync history that
  offset translation needs; the compacted MM2 topic forgets it).
- ``data_loss``: every range of source offsets that was gone before it could be copied.
- ``checkpoint_metrics``: per checkpoint pass, group and partition: offsets on both clusters, lag
  on both clusters, and the checkpoint latency (offset read on the source -> checkpoint written).
- ``task_failures``: every task of a flow's DAGs that failed for good (no retry left): its error and
  the link to its log (``srm.airflow.failures``).

Appends carry a Delta application transaction (app id, version): an append whose version is not
above the table's recorded version for that app id is skipped, so replays never duplicate rows.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from srm import locations

log = logging.getLogger(__name__)

METRICS = "replication_metrics"
SYNC_HISTORY = "offset_sync_history"
DATA_LOSS = "data_loss"
CHECKPOINT_METRICS = "checkpoint_metrics"
TASK_FAILURES = "task_failures"


def _schemas() -> dict[str, Any]:
    import pyarrow as pa

    i64, f64, s, ts = pa.int64(), pa.float64(), pa.string(), pa.timestamp("ms", tz="UTC")
    stats = [(f"{m}_{k}_ms", f64) for m in ("record_age", "latency") for k in ("min", "avg", "max", "p99")]
    return {
        METRICS: pa.schema(
            [
                ("flow", s),
                ("batch_id", i64),
                ("query_id", s),
                ("topic", s),
                ("partition", pa.int32()),
                ("target_topic", s),
                ("records", i64),
                ("bytes", i64),
                ("first_offset", i64),
                ("last_offset", i64),
                ("target_first", i64),
                ("target_last", i64),
                ("next_offset", i64),
                ("planned_end", i64),
                ("source_end", i64),
                ("lag", i64),
                ("transactions", i64),
                *stats,
                ("started_at", ts),
                ("finished_at", ts),
            ]
        ),
        SYNC_HISTORY: pa.schema(
            [
                ("flow", s),
                ("topic", s),
                ("partition", pa.int32()),
                ("topic_id", s),
                ("source_first", i64),
                ("target_first", i64),
                ("length", i64),
                ("next_offset", i64),
                ("history_offset", i64),
                ("committed_at", ts),
            ]
        ),
        CHECKPOINT_METRICS: pa.schema(
            [
                ("flow", s),
                ("pass_id", s),
                ("direction", s),
                ("group", s),
                ("topic", s),
                ("partition", pa.int32()),
                ("upstream_offset", i64),
                ("downstream_offset", i64),
                ("upstream_end", i64),
                ("downstream_end", i64),
                ("upstream_lag", i64),
                ("downstream_lag", i64),
                ("written", pa.bool_()),
                ("latency_ms", f64),
                ("seen_at", ts),
                ("written_at", ts),
            ]
        ),
        DATA_LOSS: pa.schema(
            [
                ("flow", s),
                ("topic", s),
                ("partition", pa.int32()),
                ("first_offset", i64),
                ("end_offset", i64),
                ("records", i64),
                ("reason", s),
                ("policy", s),
                ("detected_at", ts),
            ]
        ),
        TASK_FAILURES: pa.schema(
            [
                ("flow", s),
                ("dag_id", s),
                ("task_id", s),
                ("run_id", s),
                ("try_number", i64),
                ("error", s),
                ("log_url", s),
                ("failed_at", ts),
            ]
        ),
    }


class Warehouse:
    def __init__(self, root: str | Path) -> None:
        self.root = str(root)  # a path or a URI (srm.locations), handed to delta-rs as written

    def path(self, table: str) -> str:
        return locations.join(self.root, table)

    def version(self, table: str, app_id: str) -> int | None:
        """The last version appended under ``app_id``, or None."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            return DeltaTable(self.path(table)).transaction_version(app_id)
        except TableNotFoundError:
            return None

    def append(self, table: str, rows: list[dict[str, Any]], app_id: str, version: int) -> bool:
        """Append ``rows`` unless ``version`` was already appended for ``app_id``; True if written."""
        import pyarrow as pa
        from deltalake import CommitProperties, Transaction, write_deltalake

        done = self.version(table, app_id)
        if done is not None and version <= done:
            return False
        schema = _schemas()[table]
        data = pa.Table.from_pylist(rows, schema=schema)
        locations.ensure(self.root)
        write_deltalake(
            self.path(table),
            data,
            mode="append",
            commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]),
        )
        return True

    def read(self, table: str, **filters: Any) -> list[dict[str, Any]]:
        """Every row of ``table`` (as dicts) whose columns equal ``filters``; [] if it does not exist."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            dataset = DeltaTable(self.path(table)).to_pyarrow_dataset()
        except TableNotFoundError:
            return []
        # Single-threaded on purpose: with pyarrow 26 and deltalake 1.6, a threaded scan leaves
        # a C++ thread pool that aborts the interpreter at exit ("terminate called ...").
        rows: list[dict[str, Any]] = dataset.to_table(use_threads=False).to_pylist()
        return [r for r in rows if all(r.get(k) == v for k, v in filters.items())]
