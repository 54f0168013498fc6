"""A prune of the sync history rewrites only the stretches of it that change: the ones retention
drops rows of and the ingest's small appends, merged; the rest of the files stay as they are, and
what is kept equals what kept_rows keeps of the whole history (no broker: a local warehouse, the
source's log starts and topic ids given)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from srm.offsets import retention
from srm.offsets.retention import FILE_ROWS, SMALL_ROWS, HistoryPruner, Stretch, kept_rows, rewrites, stretches
from srm.storage.warehouse import SYNC_HISTORY, Warehouse
from tests.unit.test_history_store import FLOW, append, row, table

PARTITIONS = 4


def test_files_whose_history_offsets_overlap_are_one_stretch() -> None:
    found = stretches([(20, 29, 5), (0, 9, 10), (10, 19, 10), (15, 25, 3)])
    assert found == [Stretch(0, 9, 10), Stretch(10, 29, 18, files=3)]
    assert not found[0].changes and found[1].changes  # overlapping files are merged even if nothing goes


def test_small_stretches_are_merged_up_to_a_files_rows_and_large_clean_ones_are_left() -> None:
    big, small = SMALL_ROWS + 1, FILE_ROWS // 5
    sized = [
        Stretch(0, 9, big, kept=big),  # large, nothing to drop: left
        Stretch(10, 19, small, kept=small),
        Stretch(20, 29, small, kept=small),
        Stretch(30, 39, big, kept=big - 1),  # large, a row to drop: rewritten alone
        *[Stretch(40 + 10 * i, 49 + 10 * i, small, kept=small) for i in range(6)],
        Stretch(100, 109, small, kept=small),  # alone and clean at the end: left
    ]
    groups = [[(s.low, s.high) for s in group] for group in rewrites(sized)]
    assert groups == [
        [(10, 19), (20, 29)],
        [(30, 39)],
        [(40, 49), (50, 59), (60, 69), (70, 79), (80, 89)],  # 5 x FILE_ROWS / 5 fit in one file
        [(90, 99), (100, 109)],
    ]


def test_a_stretch_retention_emptied_is_rewritten_even_when_small() -> None:
    assert rewrites([Stretch(0, 9, 10, kept=0), Stretch(10, 19, SMALL_ROWS, kept=SMALL_ROWS)]) == [
        [Stretch(0, 9, 10, kept=0)]
    ]


def batch(start: int, count: int, length: int = 10) -> list[dict[str, Any]]:
    """``count`` transactions from transaction ``start`` on: each a run of ``length`` on every
    partition, in the history topic's order (a history offset per run)."""
    rows = []
    for i in range(start, start + count):
        for partition in range(PARTITIONS):
            rows.append(row("orders", partition, (i * length, i * (length + 1), length), i * PARTITIONS + partition))
    return rows


class Pruner(HistoryPruner):
    """The prune of a local warehouse, the source's log starts and topic ids given."""

    def __init__(self, root: Path, starts: dict[tuple[str, int], int]) -> None:
        config = SimpleNamespace(storage=SimpleNamespace(warehouse=root))
        super().__init__(config, SimpleNamespace(name=FLOW), source_admin=object(), target_admin=object())  # type: ignore[arg-type]
        self.starts = starts

    def _current_ids(self, topics: set[str]) -> dict[str, str]:
        return {t: "id-1" for t in topics}

    def _log_starts(self, current: dict[str, str]) -> dict[tuple[str, int], int]:
        return self.starts

    def _trim_topic(self, ingested: int, now_ms: int | None) -> int | None:
        return None


def files(warehouse: Warehouse) -> set[str]:
    return set(pa.table(DeltaTable(warehouse.path(SYNC_HISTORY)).get_add_actions(flatten=True))["path"].to_pylist())


def history(warehouse: Warehouse) -> list[tuple[Any, ...]]:
    rows = warehouse.scan(SYNC_HISTORY).drop_columns(["flow"]).to_pylist()
    return sorted((r["partition"], r["source_first"], r["length"], r["history_offset"]) for r in rows)


def as_tuples(rows: Any) -> list[tuple[Any, ...]]:
    return sorted((r["partition"], r["source_first"], r["length"], r["history_offset"]) for r in rows.to_pylist())


@pytest.fixture
def small_files(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retention, "FILE_ROWS", 400)
    monkeypatch.setattr(retention, "SMALL_ROWS", 200)


def test_a_prune_rewrites_the_stretches_retention_reached_and_merges_the_small_appends(
    tmp_path: Path, small_files: None
) -> None:
    warehouse = Warehouse(tmp_path)
    every: list[dict[str, Any]] = []
    for chunk in range(10):  # ten appends of 25 transactions x 4 partitions: 100 rows each
        rows = batch(chunk * 25, 25)
        every += rows
        append(warehouse, rows, (chunk + 1) * 25 * PARTITIONS)
    starts = {("orders", p): 0 for p in range(PARTITIONS)}

    merged = Pruner(tmp_path, starts).prune()
    # nothing to drop: the appends merged, 4 of 100 rows each per file of at most 400
    assert (merged.rows_before, merged.rows_after, merged.rewritten) == (1_000, 1_000, 1_000)
    assert (merged.files_before, merged.files_after) == (10, 3)
    assert history(warehouse) == as_tuples(table(every))

    settled = files(warehouse)
    again = Pruner(tmp_path, starts).prune()  # nothing changed: nothing rewritten
    assert again.rewritten == 0 and files(warehouse) == settled

    starts = {("orders", p): 505 for p in range(PARTITIONS)}  # retention dropped transactions 0-49
    pruned = Pruner(tmp_path, starts).prune()
    assert history(warehouse) == as_tuples(kept_rows(table(every), starts, {"orders": "id-1"}))
    assert pruned.rows_after == 1_000 - 50 * PARTITIONS
    # the first file (transactions 0-99) rewritten with the 200 rows retention left; the others kept
    assert pruned.rewritten == 200
    assert len(settled - files(warehouse)) == 1 and len(files(warehouse) - settled) == 1


def test_a_prune_keeps_each_partitions_latest_row_when_its_stretch_is_dropped(
    tmp_path: Path, small_files: None
) -> None:
    warehouse = Warehouse(tmp_path)
    old = batch(0, 50)  # every partition's runs up to transaction 49
    append(warehouse, old, 50 * PARTITIONS)
    # later, only partition 0 gets transactions
    later = [row("orders", 0, (i * 10, i * 11, 10), 50 * PARTITIONS + i) for i in range(50, 300)]
    append(warehouse, later, 50 * PARTITIONS + 300)
    starts = {("orders", 0): 2_000, **{("orders", p): 1_000 for p in range(1, PARTITIONS)}}  # all of `old` gone

    Pruner(tmp_path, starts).prune()
    kept = history(warehouse)
    assert kept == as_tuples(kept_rows(table(old + later), starts, {"orders": "id-1"}))
    # partitions 1-3 keep their latest row (the progress), partition 0 its runs above 2,000
    assert [k for k in kept if k[0] != 0] == [(p, 490, 10, 49 * PARTITIONS + p) for p in range(1, PARTITIONS)]
    assert min(k[1] + k[2] for k in kept if k[0] == 0) > 2_000


def test_a_prune_leaves_rows_appended_after_the_ingests_version_it_read(tmp_path: Path, small_files: None) -> None:
    warehouse = Warehouse(tmp_path)
    append(warehouse, batch(0, 10), 10 * PARTITIONS)

    class Late(Pruner):
        def _log_starts(self, current: dict[str, str]) -> dict[tuple[str, int], int]:
            append(warehouse, batch(10, 10), 20 * PARTITIONS)  # an ingest commits during the prune
            return super()._log_starts(current)

    Late(tmp_path, {("orders", p): 1_000 for p in range(PARTITIONS)}).prune()
    kept = history(warehouse)
    assert [k for k in kept if k[3] >= 10 * PARTITIONS] == as_tuples(table(batch(10, 10)))
    assert [k for k in kept if k[3] < 10 * PARTITIONS] == [(p, 90, 10, 9 * PARTITIONS + p) for p in range(PARTITIONS)]


def test_a_stretch_of_a_topic_deleted_on_the_source_goes_whole(tmp_path: Path, small_files: None) -> None:
    warehouse = Warehouse(tmp_path)
    append(warehouse, [row("gone", 0, (i * 10, i * 11, 10), i) for i in range(300)], 300)
    append(warehouse, batch(100, 60), 400 + 60 * PARTITIONS)

    class Deleted(Pruner):
        def _current_ids(self, topics: set[str]) -> dict[str, str]:
            return {"orders": "id-1"}

    pruned = Deleted(tmp_path, {("orders", p): 0 for p in range(PARTITIONS)}).prune()
    assert (pruned.rows_before, pruned.rows_after, pruned.rewritten) == (540, 240, 0)
    assert history(warehouse) == as_tuples(table(batch(100, 60)))
    assert pruned.files_after == 1


def test_a_file_reaching_past_the_ingests_version_is_left_to_a_later_prune(tmp_path: Path, small_files: None) -> None:
    warehouse = Warehouse(tmp_path)
    append(warehouse, batch(0, 25), 50)  # history offsets 0-99 appended under version 50
    pruned = Pruner(tmp_path, {("orders", p): 1_000 for p in range(PARTITIONS)}).prune()
    assert (pruned.rows_before, pruned.rewritten) == (0, 0)
    assert history(warehouse) == as_tuples(table(batch(0, 25)))
