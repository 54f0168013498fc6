"""Keeping a flow's sync history to what translation can still need.

Every transaction ends an offset run per partition it touched (its commit marker takes a target
offset), so the history grows with run time unless it is pruned. Translation needs, per source
partition, only the runs that end above the partition's log-start offset: a group cannot be at a
source offset the source no longer has (its consumer would reset to the log start), and a group
on the target below the first kept run resumes on the source at that run, the first record the
source still has. A prune, per flow:

- keeps, of the rows the warehouse has ingested (history offset below the ingest's version), those
  of topics the source still has, of their current incarnation (topic id), whose runs end above
  the log-start offset, and each partition's latest row (it holds the progress and topic id);
- rewrites only the files that change. Each file holds a stretch of the history topic (the
  ingest appends its chunks in the topic's order), sorted by topic, partition and source offset (a
  lookup then reads the row groups of its partition only). As the source's retention moves on, the
  oldest stretches lose their rows; the newest are the ingest's small appends. A prune rewrites a
  stretch that holds rows to drop, and merges small neighbouring stretches into files of up to
  FILE_ROWS rows: a prune writes about what was ingested since the last one and what retention
  dropped, not the whole history;
- deletes the files it replaced 15 minutes later (VACUUM, the table's deleted-file retention) and the
  commit log past 30 minutes (srm.storage.warehouse.CONFIGURATION);
- deletes the history topic's records that are ingested, that no journaled progress record needs
  (srm.replication.progress), and that are older than TOPIC_MARGIN_S (a transaction still open
  may journal progress from an offset a little below the topic's end). Every checkpoint pass trims
  the topic too (trim_topic), so what the broker keeps on disk follows the ingest within a pass.

What is kept is bounded by the source's retention, which the user controls, so a checkpoint pass
or a translation costs the same after a week as after an hour.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from srm.config.model import Flow, SrmConfig
from srm.kafka import clients
from srm.kafka.internal_topics import history_topic_name, progress_topic_name
from srm.kafka.partitions import delete_records_before, list_offsets, offsets_for_time
from srm.kafka.topics import partition_counts, topic_ids
from srm.replication.history import SORT_ORDER, history_app_id
from srm.replication.progress import journal_start, progress_group
from srm.storage.warehouse import SYNC_HISTORY, Warehouse, apply_configuration, sql_string

log = logging.getLogger(__name__)

Key = tuple[str, int]
# The history topic's records younger than this stay: a transaction open now (at most
# transaction.timeout.ms, 2 minutes) may commit a progress record journaled from an offset just
# below the topic's end, and a copier that has just started reads the history from there.
TOPIC_MARGIN_S = 600.0
# Rows of a file the prune merges stretches into (~4 MiB in ZSTD): what a prune rewrites of a
# stretch retention is eating, and what it merges the ingest's appends into. A stretch of fewer
# than SMALL_ROWS is merged with its small neighbours; one of more is left alone until retention
# drops rows of it. bench.soak: rewriting the whole history at every prune (1.25 M rows, every 5
# minutes) kept several times the live bytes on disk until the vacuum deleted what it replaced.
FILE_ROWS = 262_144
SMALL_ROWS = FILE_ROWS // 2
# The columns that tell whether a row is kept (kept_rows without repeats).
KEY_COLUMNS = ["topic", "partition", "topic_id", "source_first", "length", "history_offset"]
DEDUPE_COLUMNS = [
    "topic",
    "partition",
    "topic_id",
    "source_first",
    "target_first",
    "length",
    "next_offset",
    "history_offset",
]


@dataclass
class Pruned:
    """What a prune of one flow's history did."""

    flow: str
    rows_before: int = 0
    rows_after: int = 0
    files_before: int = 0
    files_after: int = 0
    rewritten: int = 0  # rows written
    vacuumed: int = 0
    topic_start: int | None = None  # the history topic's log-start offset after the prune
    skipped: str = ""

    def __str__(self) -> str:
        if self.skipped:
            return f"flow {self.flow}: sync history not pruned: {self.skipped}"
        topic = "" if self.topic_start is None else f"; history topic starts at offset {self.topic_start}"
        return (
            f"flow {self.flow}: sync history {self.rows_before:,} -> {self.rows_after:,} row(s), "
            f"{self.files_before} -> {self.files_after} file(s), {self.rewritten:,} row(s) rewritten, "
            f"{self.vacuumed} file(s) vacuumed{topic}"
        )


@dataclass(frozen=True)
class Stretch:
    """Files of a flow's history whose history offsets overlap, from ``low`` to ``high`` (both
    included): rewritten together or not at all. ``kept``: its rows a prune keeps."""

    low: int
    high: int
    rows: int
    files: int = 1
    kept: int | None = None  # None: not counted yet

    @property
    def changes(self) -> bool:
        """Whether a rewrite of it alone changes anything: rows to drop, or files to merge."""
        return self.files > 1 or (self.kept is not None and self.kept < self.rows)

    @property
    def size(self) -> int:
        """The rows a rewrite of it writes (all of them until counted)."""
        return self.rows if self.kept is None else self.kept


def stretches(files: Iterable[tuple[int, int, int]]) -> list[Stretch]:
    """The stretches of ``files`` given as (lowest, highest history offset, rows), oldest first."""
    found: list[Stretch] = []
    for low, high, rows in sorted(files):
        last = found[-1] if found else None
        if last is not None and low <= last.high:
            found[-1] = Stretch(last.low, max(last.high, high), last.rows + rows, last.files + 1)
        else:
            found.append(Stretch(low, high, rows))
    return found


def rewrites(sized: list[Stretch]) -> list[list[Stretch]]:
    """Which stretches (oldest first, each with its ``kept`` rows) a prune rewrites, each list into
    one file: consecutive small ones (fewer than SMALL_ROWS kept) merged up to FILE_ROWS, and any
    that changes on its own."""
    groups: list[list[Stretch]] = []
    small: list[Stretch] = []
    for stretch in sized:
        if stretch.size >= SMALL_ROWS:
            groups.append(small)
            groups.append([stretch])
            small = []
            continue
        if small and sum(s.size for s in small) + stretch.size > FILE_ROWS:
            groups.append(small)
            small = []
        small.append(stretch)
    groups.append(small)
    return [g for g in groups if len(g) > 1 or (g and g[0].changes)]


def kept_rows(rows: Any, log_starts: dict[Key, int], current_ids: dict[str, str], newest: Any = None) -> Any:
    """The rows of ``rows`` (Arrow, the history's columns but ``flow``) that translation can still
    need, sorted.

    ``log_starts``: each source partition's log-start offset; ``current_ids``: each source topic's
    id; ``newest``: each partition's newest history offset in the whole history (Arrow: topic,
    partition, history_offset_max), when ``rows`` are a part of it. Rows of a topic missing from
    ``current_ids`` (deleted on the source) or of another topic id go; so do runs that end at or
    below their partition's log start, except each partition's latest row (it holds the progress).
    Repeated rows (a replayed ingest) are kept once.
    """
    if rows.num_rows == 0:
        return rows
    kept = rows.filter(keep_mask(rows, log_starts, current_ids, newest))
    # A replayed ingest repeats a record's rows (same history offset): each is kept once.
    distinct = kept.group_by(DEDUPE_COLUMNS, use_threads=False).aggregate([("committed_at", "min")])
    distinct = distinct.rename_columns([c.removesuffix("_min") for c in distinct.column_names])
    distinct = distinct.select(rows.column_names)
    return distinct.sort_by([(c, "ascending") for c in SORT_ORDER])


def newest_rows(rows: Any) -> Any:
    """Each partition's newest history offset in ``rows`` (Arrow: topic, partition, history_offset_max)."""
    return rows.group_by(["topic", "partition"], use_threads=False).aggregate([("history_offset", "max")])


def keep_mask(rows: Any, log_starts: dict[Key, int], current_ids: dict[str, str], newest: Any = None) -> Any:
    """Of each row of ``rows`` (Arrow, at least KEY_COLUMNS), whether kept_rows keeps it (repeats aside)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.table({"topic": list(current_ids), "current_id": pa.array(list(current_ids.values()), pa.string())})
    starts = pa.table(
        {
            "topic": pa.array([t for t, _ in log_starts], pa.string()),
            "partition": pa.array([p for _, p in log_starts], pa.int32()),
            "log_start": pa.array(list(log_starts.values()), pa.int64()),
        }
    )
    newest = newest_rows(rows) if newest is None else newest
    # The joins reorder rows: each row's index goes along, and the mask is put back in order.
    indexed = rows.select(KEY_COLUMNS).append_column("row", pa.array(range(rows.num_rows), pa.int64()))
    joined = (
        indexed.join(ids, "topic", join_type="left outer", use_threads=False)
        .join(starts, ["topic", "partition"], join_type="left outer", use_threads=False)
        .join(newest, ["topic", "partition"], join_type="left outer", use_threads=False)
    )
    ends = pc.add(joined["source_first"], joined["length"])
    latest = pc.equal(joined["history_offset"], joined["history_offset_max"])
    above = pc.or_(pc.is_null(joined["log_start"]), pc.greater(ends, joined["log_start"]))
    keep = pc.fill_null(pc.and_(pc.equal(joined["topic_id"], joined["current_id"]), pc.or_(latest, above)), False)
    order = pc.sort_indices(joined["row"])
    return pc.take(keep, order)


class HistoryPruner:
    """Prunes ``flow``'s history (see the module's note); ``source_admin``/``target_admin``: admin
    clients of the flow's clusters."""

    def __init__(self, config: SrmConfig, flow: Flow, *, source_admin: Any = None, target_admin: Any = None) -> None:
        self.config = config
        self.flow = flow
        self.warehouse = Warehouse(config.storage.warehouse)
        self.source_admin = source_admin or clients.admin_client(config.cluster(flow.source))
        self.target_admin = target_admin or clients.admin_client(config.cluster(flow.target))

    def prune(self, now_ms: int | None = None) -> Pruned:
        report = Pruned(self.flow.name)
        ingested = self._ingested()
        if ingested is None:
            report.skipped = "nothing ingested yet"
            return report
        report.files_before = self._files()
        self._prune_table(ingested, report)
        report.vacuumed = self._vacuum()
        report.files_after = self._files()
        report.topic_start = self._trim_topic(ingested, now_ms)
        log.info("%s", report)
        return report

    def trim_topic(self, now_ms: int | None = None) -> int | None:
        """Only the history topic's trim (each checkpoint pass): its log-start offset after, None
        when nothing is ingested yet. A broker deletes a segment at its retention check once all of
        it lies below the log start; trimmed every pass rather than every prune, the topic holds
        TOPIC_MARGIN_S and a segment or so after each check, whenever the check falls."""
        ingested = self._ingested()
        return None if ingested is None else self._trim_topic(ingested, now_ms)

    def _ingested(self) -> int | None:
        """The history topic's offset the warehouse has ingested up to (srm.replication.history)."""
        return self.warehouse.version(SYNC_HISTORY, history_app_id(self.flow))

    # --- the table ----------------------------------------------------------------------------
    def _prune_table(self, ingested: int, report: Pruned) -> None:
        import pyarrow.compute as pc
        from deltalake.exceptions import CommitFailedError

        keys = self.warehouse.scan(SYNC_HISTORY, self._where(0, ingested - 1)[0], KEY_COLUMNS)
        if keys is None or keys.num_rows == 0:
            return
        newest = newest_rows(keys)
        current = self._current_ids({str(t) for t in pc.unique(keys["topic"]).to_pylist()})
        starts = self._log_starts(current)
        found = self._stretches(ingested)
        counts = _counts(found, keys, keep_mask(keys, starts, current, newest))
        sized = [Stretch(s.low, s.high, rows, s.files, kept) for s, (rows, kept) in zip(found, counts, strict=True)]
        del keys
        report.rows_before = sum(s.rows for s in sized)
        report.rows_after = report.rows_before
        for group in rewrites(sized):
            try:
                before, after = self._rewrite(group[0].low, group[-1].high, starts, current, newest)
            except CommitFailedError as exc:  # a concurrent writer touched the files: next time
                log.warning(
                    "flow %s: rewriting the sync history's offsets %d-%d skipped (%s)",
                    self.flow.name,
                    group[0].low,
                    group[-1].high,
                    exc,
                )
                continue
            report.rows_after += after - before
            report.rewritten += after

    def _where(self, low: int, high: int) -> tuple[Any, str]:
        """The flow's rows of history offsets ``low`` to ``high`` (included): an Arrow filter and the
        same as SQL."""
        import pyarrow.compute as pc

        name = self.flow.name
        arrow = (pc.field("flow") == name) & (pc.field("history_offset") >= low) & (pc.field("history_offset") <= high)
        sql = f"flow = {sql_string(name)} AND history_offset >= {int(low)} AND history_offset <= {int(high)}"
        return arrow, sql

    def _stretches(self, ingested: int) -> list[Stretch]:
        """The stretches of the flow's files below ``ingested`` (the ingest's later appends are left)."""
        mine = self.warehouse.files(SYNC_HISTORY, self.flow.name)
        if mine is None:
            return []
        lows, highs = mine["min.history_offset"].to_pylist(), mine["max.history_offset"].to_pylist()
        files = zip(lows, highs, mine["num_records"].to_pylist(), strict=True)
        # an empty file has no statistics (and nothing to prune)
        return stretches((low, high, rows) for low, high, rows in files if high is not None and high < ingested)

    def _rewrite(
        self, low: int, high: int, starts: dict[Key, int], current: dict[str, str], newest: Any
    ) -> tuple[int, int]:
        """Rewrite the flow's rows of history offsets ``low`` to ``high`` as the rows kept of them, in
        one file and commit; (rows before, after)."""
        import pyarrow as pa

        arrow, sql = self._where(low, high)
        rows = self.warehouse.scan(SYNC_HISTORY, arrow)
        kept = kept_rows(rows.drop_columns(["flow"]), starts, current, newest)
        flow = pa.array([self.flow.name] * kept.num_rows, pa.string())
        self.warehouse.replace(SYNC_HISTORY, kept.add_column(0, "flow", flow).select(rows.column_names), sql)
        return rows.num_rows, kept.num_rows

    def _files(self) -> int:
        return self.warehouse.footprint(SYNC_HISTORY, self.flow.name)[0]

    def _vacuum(self) -> int:
        """VACUUM (the table's deleted-file retention, srm.storage.warehouse.CONFIGURATION) and the commit
        log's cleanup; files deleted."""
        from deltalake import DeltaTable

        opened = DeltaTable(self.warehouse.path(SYNC_HISTORY))
        try:
            if apply_configuration(opened, SYNC_HISTORY):
                opened = DeltaTable(self.warehouse.path(SYNC_HISTORY))
            deleted = opened.vacuum(dry_run=False, full=True)
            opened.create_checkpoint()
            opened.cleanup_metadata()
        except Exception as exc:  # another flow's prune vacuumed the same files a moment before
            log.warning(
                "flow %s: vacuum of the sync history failed (%s); the next prune tries again", self.flow.name, exc
            )
            return 0
        return len(deleted)

    # --- the source ---------------------------------------------------------------------------
    def _current_ids(self, topics: set[str]) -> dict[str, str]:
        """The topic id of each of ``topics`` the source still has."""
        existing = partition_counts(self.source_admin, include_internal=True)
        return topic_ids(self.source_admin, sorted(t for t in topics if t in existing))

    def _log_starts(self, current: dict[str, str]) -> dict[Key, int]:
        counts = partition_counts(self.source_admin, include_internal=True)
        partitions = [(t, p) for t in sorted(current) for p in range(counts.get(t, 0))]
        return list_offsets(self.source_admin, partitions, "earliest")

    # --- the history topic --------------------------------------------------------------------
    def _trim_topic(self, ingested: int, now_ms: int | None) -> int | None:
        """Delete the history topic's records below what is still needed; its log start after."""
        topic = history_topic_name(self.flow)
        now = int(time.time() * 1000) if now_ms is None else now_ms
        young = offsets_for_time(self.target_admin, [(topic, 0)], now - int(TOPIC_MARGIN_S * 1000))[(topic, 0)]
        bound = min(ingested, young)
        journal = self._journal_start()
        if journal is not None:
            bound = min(bound, journal)
        low = list_offsets(self.target_admin, [(topic, 0)], "earliest")[(topic, 0)]
        if bound <= low:
            return low
        return delete_records_before(self.target_admin, topic, 0, bound)

    def _journal_start(self) -> int | None:
        if progress_topic_name(self.flow) not in partition_counts(self.target_admin, include_internal=True):
            return None
        consumer = clients.reader(self.config.cluster(self.flow.target), progress_group(self.flow.source))
        try:
            return journal_start(consumer, self.target_admin, self.flow)
        finally:
            consumer.close()


def _counts(found: list[Stretch], keys: Any, kept: Any) -> list[tuple[int, int]]:
    """(rows, rows kept) of each stretch of ``found`` (oldest first) among ``keys`` by their history
    offsets, of which ``kept`` tells which are kept."""
    import numpy as np

    if not found:
        return []
    offsets = keys["history_offset"].to_numpy()
    at = np.searchsorted(np.array([s.low for s in found], dtype=np.int64), offsets, side="right") - 1
    inside = (at >= 0) & (offsets <= np.array([s.high for s in found], dtype=np.int64)[np.maximum(at, 0)])
    rows = np.bincount(at[inside], minlength=len(found))
    kept_rows_ = np.bincount(at[inside & kept.to_numpy(zero_copy_only=False)], minlength=len(found))
    return [(int(r), int(k)) for r, k in zip(rows, kept_rows_, strict=True)]
