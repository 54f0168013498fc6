"""The warehouse: Delta tables written with delta-rs, appended idempotently.

Tables (one folder each under the warehouse root):

- ``replication_metrics``: one row per micro-batch and source partition.
- ``offset_sync_history``: the offset runs the data path committed that translation can still need
  (the exact sync history; the compacted MM2 topic forgets it), partitioned by flow, each appended
  chunk sorted by topic, partition and source offset so a lookup reads few row groups; pruned
  below the source's log-start offsets and rewritten by :mod:`srm.offsets.retention`.
- ``data_loss``: every range of source offsets that was gone before it could be copied.
- ``checkpoint_metrics``: per checkpoint pass, group and partition: offsets on both clusters, lag
  on both clusters, and the checkpoint latency (offset read on the source -> checkpoint written).
- ``task_failures``: every task of a flow's DAGs that failed for good (no retry left): its error and
  the link to its log (``srm.airflow.failures``).
- ``replication_metrics_hourly``: ``replication_metrics`` rolled up per flow, source partition and
  hour (``srm.maintenance.metrics_rollup``): records and bytes summed, latency and record age as
  record-weighted averages with their weights, the partition's newest lag and when it was measured.
- ``checkpoint_metrics_hourly``: ``checkpoint_metrics`` per flow, topic and hour: the mean
  checkpoint latency and how many rows it averages, so that means of several hours stay exact.

Appends carry a Delta application transaction (app id, version): an append whose version is not
above the table's recorded version for that app id is skipped, so replays never duplicate rows.
An hourly table's app id ``rollup:<flow>`` has as version the flow's rollup watermark: the index
(hours since the epoch) of the first hour not rolled up yet. Every earlier hour of the flow is in
the hourly table; that hour and later ones are only in the raw table.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any

from srm.storage import locations, row_groups
from srm.storage.allocator import system_allocator
from srm.storage.row_groups import RowGroupTest

log = logging.getLogger(__name__)

METRICS = "replication_metrics"
SYNC_HISTORY = "offset_sync_history"
DATA_LOSS = "data_loss"
CHECKPOINT_METRICS = "checkpoint_metrics"
TASK_FAILURES = "task_failures"
FLOW_STATES = "flow_states"  # a row when a running flow starts or stops waiting for a cluster
METRICS_HOURLY = "replication_metrics_hourly"
CHECKPOINTS_HOURLY = "checkpoint_metrics_hourly"
HOUR_MS = 3_600_000
# Rows per Parquet row group of what the project writes (appends, compactions, rewrites). A scan
# skips row groups by their statistics. The rows of a metrics file are in the order they were
# written (time): a one-hour window decodes one or two groups of 64 Ki rows (11 hours of 100
# partitions' one-minute batches). With delta-rs' default of 1 Mi rows, the one-hour read of a
# compacted month (bench.rest_metrics' data) took 5x as long. The history's are sorted by topic,
# partition and source offset: a lookup decodes the groups of its partition.
ROW_GROUP_ROWS = 65_536
# A history lookup reads each partition's runs from a little below the groups' positions on: in
# groups of 64 Ki rows it decoded the whole of a partition's recent history with them, more as the
# history deepened to the source's retention (bench.soak: the checkpoint pass slowed with it). In
# groups of 8 Ki rows a pass over a soak's history (1.3 M rows in one sorted file, 70 partitions)
# decoded 718 k rows to keep 160 k, its Arrow buffers peaking at 144 MiB; in groups of 2 Ki 302 k
# rows and 73 MiB, with as little CPU (1 Ki: more CPU, no less memory).
TABLE_ROW_GROUP_ROWS = {SYNC_HISTORY: 2_048}
# Tables written per flow into a folder of their own (Delta partitions): a flow's rewrite never
# touches another's files, and a scan of one flow skips the others' folders.
PARTITIONS: dict[str, list[str]] = {SYNC_HISTORY: ["flow"]}
# The history's files are rewritten as it is pruned (every few minutes): the files a rewrite replaced are
# deleted by VACUUM 15 minutes later (long past any reader's scan: a lookup takes seconds), and the
# commit log is kept 30 minutes, not Delta's 7 and 30 days: a reader needs only the latest
# checkpoint and the commits after it, and every append (a commit a few seconds apart) adds a log
# file, so a longer retention grows the folder for as long (bench.soak: +30 MiB an hour with a day).
# Tables created before take these settings at their next prune (apply_configuration).
CONFIGURATION: dict[str, dict[str, str]] = {
    SYNC_HISTORY: {
        "delta.deletedFileRetentionDuration": "interval 15 minutes",
        "delta.logRetentionDuration": "interval 30 minutes",
    }
}


def apply_configuration(opened: Any, table: str) -> bool:
    """Give an existing Delta table ``opened`` the settings CONFIGURATION has for ``table`` (tables
    created by an earlier release keep the settings they were created with); True if it changed."""
    wanted = CONFIGURATION.get(table, {})
    current = opened.metadata().configuration
    changed = {k: v for k, v in wanted.items() if current.get(k) != v}
    if changed:
        opened.alter.set_table_properties(changed, raise_if_not_exists=False)
    return bool(changed)


def rollup_app_id(flow: str) -> str:
    """The app id whose version in an hourly table is ``flow``'s rollup watermark (an hour index)."""
    return f"rollup:{flow}"


def in_window(flow: str, column: str, start_ms: int, end_ms: int) -> Any:
    """The Arrow filter for rows of ``flow`` whose timestamp ``column`` is in [start_ms, end_ms),
    pushed down into a Delta scan (files and row groups outside are skipped by their statistics)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    start, end = (pa.scalar(ms, pa.timestamp("ms", tz="UTC")) for ms in (start_ms, end_ms))
    return (pc.field("flow") == flow) & (pc.field(column) >= start) & (pc.field(column) < end)


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
                ("aborted", i64),  # added later: null in rows written before
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
        FLOW_STATES: pa.schema(
            [
                ("flow", s),
                ("run_id", s),
                ("state", s),  # waiting | copying
                ("cluster", s),  # what it waits for
                ("reason", s),
                ("since", ts),
            ]
        ),
        METRICS_HOURLY: pa.schema(
            [
                ("flow", s),
                ("topic", s),
                ("partition", pa.int32()),
                ("target_topic", s),
                ("hour", ts),  # the hour's start
                ("rows", i64),  # raw rows rolled up
                ("records", i64),
                ("bytes", i64),
                ("latency_avg_ms", f64),
                ("latency_records", i64),  # the weight of latency_avg_ms
                ("record_age_avg_ms", f64),
                ("record_age_records", i64),
                ("lag", i64),  # the newest lag of the hour
                ("lag_at", ts),  # when it was measured (finished_at of its row)
            ]
        ),
        CHECKPOINTS_HOURLY: pa.schema(
            [
                ("flow", s),
                ("topic", s),
                ("hour", ts),
                ("latency_avg_ms", f64),
                ("latency_rows", i64),  # the weight of latency_avg_ms
            ]
        ),
    }


class Warehouse:
    def __init__(self, root: str | Path) -> None:
        self.root = str(root)  # a path or a URI (srm.storage.locations), handed to delta-rs as written
        system_allocator()

    def path(self, table: str) -> str:
        return locations.join(self.root, table)

    def version(self, table: str, app_id: str) -> int | None:
        """The last version appended under ``app_id``, or None."""
        opened = self._open(table)
        return opened.transaction_version(app_id) if opened is not None else None

    def append(
        self, table: str, rows: list[dict[str, Any]], app_id: str, version: int, *, sort_by: list[str] | None = None
    ) -> bool:
        """Append ``rows`` (sorted by the columns ``sort_by`` first, if given) unless ``version`` was
        already appended for ``app_id``; True if written."""
        import pyarrow as pa

        opened = self._open(table, create=True)
        done = opened.transaction_version(app_id)
        if done is not None and version <= done:
            return False
        data = pa.Table.from_pylist(rows, schema=_schemas()[table])
        if sort_by:
            data = data.sort_by([(column, "ascending") for column in sort_by])
        self._commit(table, opened, data, app_id, version)
        return True

    def advance(self, table: str, data: Any, app_id: str, start: int | None, version: int) -> bool:
        """Append ``data`` as the step of ``app_id`` from version ``start`` (None: its first step) to
        ``version``; False, and nothing written, when the table's version for ``app_id`` is not
        ``start`` (another writer took the step)."""
        opened = self._open(table, create=True)
        if opened.transaction_version(app_id) != start:
            return False
        self._commit(table, opened, data, app_id, version)
        return True

    def _open(self, table: str, *, create: bool = False) -> Any:
        """The table (its latest snapshot); None if it does not exist, unless ``create``."""
        from deltalake import DeltaTable
        from deltalake.exceptions import CommitFailedError, TableNotFoundError

        try:
            return DeltaTable(self.path(table))
        except TableNotFoundError:
            if not create:
                return None
        locations.ensure(self.root)
        # An empty table first, so that even the first append has a snapshot to check against
        # (CommitFailedError: another writer created it at the same moment).
        with contextlib.suppress(CommitFailedError):
            DeltaTable.create(
                self.path(table),
                _schemas()[table],
                mode="ignore",
                partition_by=PARTITIONS.get(table),
                configuration=CONFIGURATION.get(table),
            )
        return DeltaTable(self.path(table))

    @staticmethod
    def _commit(table: str, opened: Any, data: Any, app_id: str, version: int) -> None:
        # The check before and this commit share the snapshot ``opened``: a commit under the same
        # app id in between fails this one (delta-rs' conflict check raises CommitFailedError, a
        # concurrent transaction) instead of adding the rows twice.
        from deltalake import CommitProperties, Transaction, write_deltalake

        commit = CommitProperties(app_transactions=[Transaction(app_id, version)])
        # merge: a column added to a table's schema since the table was created is added to it
        write_deltalake(
            opened,
            data,
            mode="append",
            schema_mode="merge",
            commit_properties=commit,
            writer_properties=writer_properties(table),
        )

    def read(self, table: str, **filters: Any) -> list[dict[str, Any]]:
        """The rows of ``table`` (as dicts) whose columns equal ``filters``; [] if it does not exist."""
        import pyarrow.compute as pc

        where = None
        for column, value in filters.items():
            term = pc.field(column) == value
            where = term if where is None else where & term
        scanned = self.scan(table, where)
        return [] if scanned is None else list(scanned.to_pylist())

    def scan(
        self, table: str, where: Any = None, columns: list[str] | None = None, *, groups: RowGroupTest | None = None
    ) -> Any:
        """The rows of ``table`` that match the Arrow expression ``where``, as an Arrow table of
        ``columns`` (all when None); None if the table does not exist. The filter is pushed into
        the scan: partitions, files and row groups that cannot match are not read. ``groups``:
        whether a row group may hold rows wanted, asked with its statistics (:mod:`.row_groups`); the
        rows of those that may come whole, for the caller to keep its rows (by a join)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            dataset = DeltaTable(self.path(table)).to_pyarrow_dataset()
        except TableNotFoundError:
            return None
        if groups is not None:
            dataset = row_groups.selected(dataset, where, groups)
        # Single-threaded on purpose: with pyarrow 26 and deltalake 1.6, a threaded scan leaves
        # a C++ thread pool that aborts the interpreter at exit ("terminate called ...").
        return dataset.to_table(filter=where, columns=columns, use_threads=False)

    def footprint(self, table: str, flow: str | None = None) -> tuple[int, int]:
        """(files, bytes) of :meth:`files`; (0, 0) without a table."""
        import pyarrow.compute as pc

        if (actions := self.files(table, flow)) is None:
            return 0, 0
        return actions.num_rows, int(pc.sum(actions["size_bytes"]).as_py() or 0)

    def files(self, table: str, flow: str | None = None) -> Any:
        """The data files of the table's current snapshot (of ``flow``'s partition): Delta's add actions
        as Arrow rows (path, size_bytes, num_records, min.<column>, max.<column>); None without a table."""
        import pyarrow.compute as pc
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        try:
            actions = pa_table(DeltaTable(self.path(table)).get_add_actions(flatten=True))
        except TableNotFoundError:
            return None
        return actions if flow is None else actions.filter(pc.field("partition.flow") == flow)

    def replace(self, table: str, data: Any, predicate: str) -> None:
        """Replace the rows matching the SQL ``predicate`` with ``data`` (Arrow; each of its rows
        must match it) in one commit. A concurrent commit that touched the same files fails this
        one (CommitFailedError) and nothing changes."""
        from deltalake import write_deltalake

        opened = self._open(table, create=True)
        properties = writer_properties(table)
        write_deltalake(opened, data, mode="overwrite", predicate=predicate, writer_properties=properties)


def writer_properties(table: str) -> Any:
    """Row groups of ROW_GROUP_ROWS (or the table's own, TABLE_ROW_GROUP_ROWS): a scan decodes only
    the row groups its filter may match."""
    from deltalake import WriterProperties

    rows = TABLE_ROW_GROUP_ROWS.get(table, ROW_GROUP_ROWS)
    return WriterProperties(max_row_group_size=rows, compression="ZSTD")


def pa_table(data: Any) -> Any:
    """An Arrow table of ``data`` (anything with the Arrow C stream interface)."""
    import pyarrow as pa

    return data if isinstance(data, pa.Table) else pa.table(data)


def sql_string(value: str) -> str:
    """``value`` as a SQL string literal of a Delta predicate."""
    return "'" + value.replace("'", "''") + "'"
