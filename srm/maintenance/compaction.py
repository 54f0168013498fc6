"""OPTIMIZE and VACUUM of the warehouse's metrics tables, at most once an hour per table.

Every batch or lease appends a small file to ``replication_metrics`` (every checkpoint pass one to
``checkpoint_metrics``, every rollup step one to an hourly table); a reader opens each file it
cannot rule out by its statistics. Compaction (delta-rs' bin-packing OPTIMIZE) merges them in the
order they were written, so a file still spans a stretch of time and a window's scan skips the
others. Row groups are kept small for the same reason inside a large file. Z-ordering is not used:
delta-rs rewrites every file of the table on each z-order run, an hourly copy of the whole table.

VACUUM then deletes the files compaction removed, once Delta's default retention (7 days) has
passed: a reader holding an older snapshot keeps its files. Vacuum in its default (lite) mode
deletes only such removed files, never a file a concurrent writer has not committed yet.

The maintenance DAGs of several flows share these tables, and two OPTIMIZEs of one table must never
overlap: delta-rs 1.6 commits both, and the rows of the files both rewrote are then in the table
twice (checked with two compactions from the same snapshot; its OPTIMIZE also drops the app
transactions of its commit properties, so it cannot carry a check of its own). A run therefore
first takes the table for an hour: an empty commit under app id ``srm:maintenance`` whose version
is the minute it was taken, made only if the version it read is an hour old or more, on that
snapshot, so that a concurrent taker fails delta-rs' conflict check of app ids (as rollup steps
do) and skips the table. The taker's compaction ends within its task's execution timeout (minutes),
long before the next run may take the table.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from srm.storage.warehouse import (
    CHECKPOINT_METRICS,
    CHECKPOINTS_HOURLY,
    METRICS,
    METRICS_HOURLY,
    Warehouse,
    writer_properties,
)

log = logging.getLogger(__name__)

TABLES = (METRICS, METRICS_HOURLY, CHECKPOINT_METRICS, CHECKPOINTS_HOURLY)
LEASE_APP_ID = "srm:maintenance"
LEASE_MINUTES = 60  # a table is compacted at most once in this long


@dataclass(frozen=True)
class Upkeep:
    """What the maintenance of one table did."""

    table: str
    files_before: int = 0
    files_after: int = 0
    files_vacuumed: int = 0
    bytes_vacuumed: int = 0
    skipped: str = ""

    def __str__(self) -> str:
        if self.skipped:
            return f"{self.table}: {self.skipped}"
        return (
            f"{self.table}: optimized, {self.files_before} -> {self.files_after} file(s); vacuumed "
            f"{self.files_vacuumed} file(s), {self.bytes_vacuumed:,} bytes"
        )


def maintain(warehouse: Warehouse, tables: tuple[str, ...] = TABLES, now_ms: int | None = None) -> list[Upkeep]:
    """OPTIMIZE then VACUUM each of ``tables`` not compacted in the hour before ``now_ms`` (default now)."""
    minute = (int(time.time() * 1000) if now_ms is None else now_ms) // 60_000
    return [maintain_table(warehouse, table, minute) for table in tables]


def maintain_table(warehouse: Warehouse, table: str, minute: int) -> Upkeep:
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError, TableNotFoundError

    try:
        opened = DeltaTable(warehouse.path(table))
    except TableNotFoundError:
        return Upkeep(table, skipped="no table yet")
    taken = opened.transaction_version(LEASE_APP_ID)
    if taken is not None and minute - taken < LEASE_MINUTES:
        return Upkeep(table, skipped=f"compacted {minute - taken} min ago (at most once in {LEASE_MINUTES} min)")
    try:
        took = warehouse.advance(table, _schema(opened).empty_table(), LEASE_APP_ID, taken, minute)
    except CommitFailedError:
        took = False
    if not took:
        return Upkeep(table, skipped="taken by a concurrent run")
    opened.update_incremental()
    before = len(opened.file_uris())
    try:
        merged = _compact(table, opened)
    except CommitFailedError as exc:
        log.warning("%s: OPTIMIZE skipped, its commit conflicted with another writer (%s)", table, exc)
        merged = {}
    vacuumed = opened.vacuum(dry_run=False, full=True)
    after = before - merged.get("numFilesRemoved", 0) + merged.get("numFilesAdded", 0)
    return Upkeep(table, before, after, len(vacuumed), _bytes_vacuumed(opened) if vacuumed else 0)


def _compact(table: str, opened: Any) -> dict[str, Any]:
    merged: dict[str, Any] = opened.optimize.compact(writer_properties=writer_properties(table))
    return merged


def _schema(opened: Any) -> Any:
    import pyarrow as pa

    return pa.schema(opened.schema().to_arrow())


def _bytes_vacuumed(opened: Any) -> int:
    """The size of the files the last VACUUM deleted (its VACUUM START commit records it)."""
    for entry in opened.history(10):
        if entry.get("operation") == "VACUUM START":
            return int(entry.get("operationMetrics", {}).get("sizeOfDataToDelete", 0))
    return 0
