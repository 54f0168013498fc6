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
- rewrites them sorted by topic, partition and source offset (a lookup then reads the row groups
  of its partition only) in one commit per batch of topics, which also merges the small files of
  the ingest's appends;
- deletes the files it replaced 15 minutes later (VACUUM, the table's deleted-file retention) and the
  commit log past 30 minutes (srm.storage.warehouse.CONFIGURATION);
- deletes the history topic's records that are ingested, that no journaled progress record needs
  (srm.replication.progress), and that are older than TOPIC_MARGIN_S (a transaction still open
  may journal progress from an offset a little below the topic's end).

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
from srm.replication.history import SORT_ORDER
from srm.replication.progress import journal_start, progress_group
from srm.storage.warehouse import SYNC_HISTORY, Warehouse, apply_configuration, sql_string

log = logging.getLogger(__name__)

Key = tuple[str, int]
# Topics whose rows one rewrite commit holds: bounds the prune's memory to their rows.
TOPICS_PER_REWRITE = 8
# The history topic's records younger than this stay: a transaction open now (at most
# transaction.timeout.ms, 2 minutes) may commit a progress record journaled from an offset just
# below the topic's end, and a copier that has just started reads the history from there.
TOPIC_MARGIN_S = 600.0
# A flow's rows are rewritten (merged) also when nothing is pruned once its files are this many:
# the ingest appends a small file per lease or batch.
MAX_FILES = 32
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
    vacuumed: int = 0
    topic_start: int | None = None  # the history topic's log-start offset after the prune
    skipped: str = ""

    def __str__(self) -> str:
        if self.skipped:
            return f"flow {self.flow}: sync history not pruned: {self.skipped}"
        topic = "" if self.topic_start is None else f"; history topic starts at offset {self.topic_start}"
        return (
            f"flow {self.flow}: sync history {self.rows_before:,} -> {self.rows_after:,} row(s), "
            f"{self.files_before} -> {self.files_after} file(s), {self.vacuumed} file(s) vacuumed{topic}"
        )


def kept_rows(rows: Any, log_starts: dict[Key, int], current_ids: dict[str, str]) -> Any:
    """The rows of ``rows`` (Arrow, the history's columns but ``flow``) that translation can still
    need, sorted.

    ``log_starts``: each source partition's log-start offset; ``current_ids``: each source topic's
    id. Rows of a topic missing from ``current_ids`` (deleted on the source) or of another topic id
    go; so do runs that end at or below their partition's log start, except each partition's
    latest row (it holds the progress). Repeated rows (a replayed ingest) are kept once.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return rows
    ids = pa.table({"topic": list(current_ids), "current_id": list(current_ids.values())})
    starts = pa.table(
        {
            "topic": [t for t, _ in log_starts],
            "partition": pa.array([p for _, p in log_starts], pa.int32()),
            "log_start": pa.array(list(log_starts.values()), pa.int64()),
        }
    )
    newest = rows.group_by(["topic", "partition"], use_threads=False).aggregate([("history_offset", "max")])
    joined = (
        rows.join(ids, "topic", join_type="inner", use_threads=False)
        .join(starts, ["topic", "partition"], join_type="left outer", use_threads=False)
        .join(newest, ["topic", "partition"], join_type="inner", use_threads=False)
    )
    ends = pc.add(joined["source_first"], joined["length"])
    latest = pc.equal(joined["history_offset"], joined["history_offset_max"])
    above = pc.or_(pc.is_null(joined["log_start"]), pc.greater(ends, joined["log_start"]))
    keep = pc.and_(pc.equal(joined["topic_id"], joined["current_id"]), pc.or_(latest, above))
    kept = joined.filter(keep).select(rows.column_names)
    # A replayed ingest repeats a record's rows (same history offset): each is kept once.
    distinct = kept.group_by(DEDUPE_COLUMNS, use_threads=False).aggregate([("committed_at", "min")])
    distinct = distinct.rename_columns([c.removesuffix("_min") for c in distinct.column_names])
    distinct = distinct.select(rows.column_names)
    return distinct.sort_by([(c, "ascending") for c in SORT_ORDER])


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
        from deltalake.exceptions import CommitFailedError

        report = Pruned(self.flow.name)
        ingested = self.warehouse.version(SYNC_HISTORY, f"history:{self.flow.name}")
        if ingested is None:
            report.skipped = "nothing ingested yet"
            return report
        report.files_before = self._files()
        topics = self._topics(ingested)
        current = self._current_ids(topics)
        starts = self._log_starts(current)
        rewrite = report.files_before > MAX_FILES
        for batch in _batches(sorted(topics), TOPICS_PER_REWRITE):
            try:
                before, after = self._prune_topics(batch, ingested, starts, current, force=rewrite)
            except CommitFailedError as exc:  # a concurrent writer touched the files: next time
                log.warning(
                    "flow %s: pruning the sync history of %d topic(s) skipped (%s)", self.flow.name, len(batch), exc
                )
                continue
            report.rows_before += before
            report.rows_after += after
        report.vacuumed = self._vacuum()
        report.files_after = self._files()
        report.topic_start = self._trim_topic(ingested, now_ms)
        log.info("%s", report)
        return report

    # --- the table ----------------------------------------------------------------------------
    def _where(self, ingested: int, topics: Iterable[str] | None = None) -> tuple[Any, str]:
        """The rows of the flow below ``ingested`` (of ``topics``): an Arrow filter and the same as SQL."""
        import pyarrow.compute as pc

        arrow = (pc.field("flow") == self.flow.name) & (pc.field("history_offset") < ingested)
        sql = f"flow = {sql_string(self.flow.name)} AND history_offset < {int(ingested)}"
        if topics is not None:
            names = sorted(topics)
            arrow = arrow & pc.field("topic").isin(names)
            sql += " AND topic IN (" + ", ".join(sql_string(t) for t in names) + ")"
        return arrow, sql

    def _topics(self, ingested: int) -> set[str]:
        import pyarrow.compute as pc

        found = self.warehouse.scan(SYNC_HISTORY, self._where(ingested)[0], ["topic"])
        return set() if found is None else {str(t) for t in pc.unique(found["topic"]).to_pylist()}

    def _prune_topics(
        self, topics: list[str], ingested: int, starts: dict[Key, int], current: dict[str, str], *, force: bool
    ) -> tuple[int, int]:
        arrow, sql = self._where(ingested, topics)
        rows = self.warehouse.scan(SYNC_HISTORY, arrow)
        kept = kept_rows(rows.drop_columns(["flow"]), starts, current)
        if kept.num_rows == rows.num_rows and not force:
            return rows.num_rows, kept.num_rows
        import pyarrow as pa

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


def _batches(items: list[str], size: int) -> list[list[str]]:
    return [items[i : i + size] for i in range(0, len(items), size)]
