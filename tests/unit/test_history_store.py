"""The sync history in the warehouse: lookups read what they need, pruning keeps what translation
can still need, and translation stays exact after it (no broker: a local warehouse folder)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from srm.offsets import history as history_module
from srm.offsets.flow_history import build_history
from srm.offsets.history import COLUMNS, PartitionGroups, Wanted, read_history
from srm.offsets.retention import kept_rows
from srm.offsets.translate import PartitionHistory, to_source, to_target
from srm.replication.history import SORT_ORDER
from srm.replication.runs import OffsetRun
from srm.storage.warehouse import SYNC_HISTORY, Warehouse, _schemas

FLOW = "west->east"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def row(topic: str, partition: int, run: tuple[int, int, int], history: int, **kw: Any) -> dict[str, Any]:
    """A history row of ``run`` (source first, target first, length) at ``history`` in the topic."""
    source, target, length = run
    return {
        "flow": kw.get("flow", FLOW),
        "topic": topic,
        "partition": partition,
        "topic_id": kw.get("topic_id", "id-1"),
        "source_first": source,
        "target_first": target,
        "length": length,
        "next_offset": kw.get("next_offset", source + length),
        "history_offset": history,
        "committed_at": T0,
    }


def transactions(topic: str, partition: int, count: int, size: int, history_start: int = 0) -> list[dict[str, Any]]:
    """``count`` transactions of ``size`` records each: each commit marker takes a target offset."""
    return [row(topic, partition, (i * size, i * (size + 1), size), history_start + 2 * i) for i in range(count)]


def append(warehouse: Warehouse, rows: list[dict[str, Any]], version: int) -> None:
    warehouse.append(SYNC_HISTORY, rows, f"history:{FLOW}", version, sort_by=SORT_ORDER)


def empty_tail() -> Any:
    return pa.schema(_schemas()[SYNC_HISTORY]).empty_table().select(COLUMNS)


def test_a_lookup_reads_its_partitions_from_a_little_below_its_offset(tmp_path: Path, monkeypatch: Any) -> None:
    warehouse = Warehouse(tmp_path)
    append(warehouse, transactions("orders", 0, 2_000, 10) + transactions("orders", 1, 2_000, 10), 1)
    append(warehouse, [row("other", 0, (0, 0, 5), 1, flow="east->west")], 2)
    monkeypatch.setattr(history_module, "LOOKBACKS", (100,))
    history = read_history(warehouse, FLOW, Wanted({("orders", 0): 15_000}), empty_tail())
    assert history.partitions == [("orders", 0)]
    # the runs from a little below 15,000 on: ten of 10 records below it, the 500 from it
    assert history.runs.num_rows == 510
    # exact all the same: 15,003 is the 4th record of the 1,500th transaction
    assert to_target(history.get("orders", 0), 15_003) == 1_500 * 11 + 3
    assert history.progress[("orders", 0)] == 20_000


def test_a_lookup_of_many_partitions_recent_runs_decodes_little_more_than_it_keeps(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A pruned history is one file sorted by partition: a pass over the groups of 40 partitions,
    2,000 runs kept of each one's 10,000, decodes at most 2.5x the rows it keeps (in row groups of
    8 Ki rows it decoded all 400,000: every group held some partition's recent runs)."""
    from srm.storage import row_groups

    warehouse = Warehouse(tmp_path)
    append(warehouse, [r for p in range(40) for r in transactions("orders", p, 10_000, 10)], 1)
    decoded: list[int] = []
    choose = row_groups.selected

    def counted(dataset: Any, where: Any, test: Any) -> Any:
        chosen = choose(dataset, where, test)
        decoded.extend(g.num_rows for f in chosen.get_fragments() for g in f.row_groups)
        return chosen

    monkeypatch.setattr(row_groups, "selected", counted)
    monkeypatch.setattr(history_module, "LOOKBACKS", (10,))
    wanted = Wanted({("orders", p): 80_005 for p in range(40)})
    history = read_history(warehouse, FLOW, wanted, empty_tail())
    assert history.runs.num_rows == 40 * 2_000  # from 79,995 on: the run holding 80,005 and after
    assert sum(decoded) <= 2.5 * history.runs.num_rows
    assert to_target(history.get("orders", 39), 80_005) == 8_000 * 11 + 5


def test_a_window_that_misses_the_run_holding_the_offset_reads_the_partition_whole(
    tmp_path: Path, monkeypatch: Any
) -> None:
    warehouse = Warehouse(tmp_path)
    # one run of 1,000 records (an available-now chunk), then small ones
    rows = [row("orders", 0, (0, 0, 1_000), 0)] + [
        row("orders", 0, (1_000 + 10 * i, 1_001 + 11 * i, 10), 1 + i) for i in range(50)
    ]
    append(warehouse, rows, 1)
    monkeypatch.setattr(history_module, "LOOKBACKS", (100, 200))
    history = read_history(warehouse, FLOW, Wanted({("orders", 0): 900}), empty_tail())
    assert to_target(history.get("orders", 0), 900) == 900
    assert history.runs.num_rows == 51


def test_a_window_that_misses_the_run_holding_the_offset_tries_a_deeper_one_before_the_whole_partition(
    tmp_path: Path, monkeypatch: Any
) -> None:
    warehouse = Warehouse(tmp_path)
    # runs of 10 records up to 4,000, one of 500 (a long transaction), then runs of 10 again
    small = [(10 * i, 11 * i, 10) for i in range(400)]
    runs = [*small, (4_000, 4_400, 500)] + [(4_500 + 10 * i, 4_901 + 11 * i, 10) for i in range(100)]
    append(warehouse, [row("orders", 0, run, i) for i, run in enumerate(runs)], 1)
    monkeypatch.setattr(history_module, "LOOKBACKS", (100, 1_000))
    history = read_history(warehouse, FLOW, Wanted({("orders", 0): 4_450}), empty_tail())
    # the first window (from 4,350) holds none of the long run; the second (from 3,450) does
    assert history.runs.num_rows == len([r for r in runs if r[0] >= 3_450])
    assert to_target(history.get("orders", 0), 4_450) == 4_400 + 450
    assert to_target(history.get("orders", 0), 5_000) == 4_901 + 11 * 50
    assert history.progress[("orders", 0)] == 5_500


def test_only_the_current_incarnation_counts_and_the_tail_is_read_too(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path)
    append(warehouse, transactions("orders", 0, 5, 10), 1)  # topic id id-1
    tail = pa.Table.from_pylist(
        [row("orders", 0, (0, 60, 3), 20, topic_id="id-2")], schema=_schemas()[SYNC_HISTORY]
    ).select(COLUMNS)
    history = read_history(warehouse, FLOW, Wanted(every=True), tail)
    assert history.get("orders", 0) == PartitionHistory.of([OffsetRun(0, 60, 3)], 3)
    assert history.topic_ids == {("orders", 0): "id-2"}


def table(rows: list[dict[str, Any]]) -> Any:
    return pa.Table.from_pylist(rows, schema=_schemas()[SYNC_HISTORY]).drop_columns(["flow"])


def test_pruning_keeps_the_runs_above_the_log_start_and_each_partitions_latest_row() -> None:
    rows = transactions("orders", 0, 10, 10) + transactions("orders", 1, 3, 10, history_start=100)
    rows.append(row("orders", 1, (30, -1, 0), 200))  # a later transaction that moved the progress alone
    rows.append(rows[7])  # a replayed ingest repeats a record's rows
    kept = kept_rows(table(rows), {("orders", 0): 45, ("orders", 1): 1_000}, {"orders": "id-1"})
    by_partition: dict[int, list[tuple[int, int]]] = {}
    for r in kept.to_pylist():
        by_partition.setdefault(r["partition"], []).append((r["source_first"], r["length"]))
    # partition 0: the run 40-49 holds the log start 45, and every later one
    assert by_partition[0] == [(40, 10), (50, 10), (60, 10), (70, 10), (80, 10), (90, 10)]
    # partition 1: the source kept nothing below 1,000; the latest row holds the progress
    assert by_partition[1] == [(30, 0)]
    assert kept.column_names == table(rows).column_names
    assert [(r["topic"], r["partition"], r["source_first"]) for r in kept.to_pylist()] == sorted(
        (r["topic"], r["partition"], r["source_first"]) for r in kept.to_pylist()
    )


def test_pruning_drops_topics_deleted_on_the_source_and_earlier_incarnations() -> None:
    rows = transactions("gone", 0, 3, 10) + transactions("orders", 0, 3, 10)
    rows += [row("orders", 0, (0, 40, 5), 50, topic_id="id-2")]
    kept = kept_rows(table(rows), {("orders", 0): 0}, {"orders": "id-2"})
    assert [(r["topic"], r["topic_id"], r["source_first"]) for r in kept.to_pylist()] == [("orders", "id-2", 0)]


@pytest.mark.parametrize("seed", range(5))
def test_translation_after_pruning_equals_translation_before_it_at_and_above_the_log_start(seed: int) -> None:
    rng = random.Random(seed)
    rows, source, target = [], 0, 0
    for history in range(300):
        source += rng.choice([0, 0, 0, 1, 3])  # aborted records and markers on the source
        length = rng.randint(1, 20)
        rows.append(row("t", 0, (source, target, length), history))
        source += length
        target += length + 1
    log_start = rng.randint(0, source)
    before = build_history(FLOW, table(rows).select(COLUMNS)).get("t", 0)
    after = build_history(FLOW, kept_rows(table(rows), {("t", 0): log_start}, {"t": "id-1"}).select(COLUMNS)).get(
        "t", 0
    )
    assert len(after.runs) < len(before.runs) or log_start == 0
    for offset in range(log_start, source + 5):
        assert to_target(after, offset) == to_target(before, offset)
    first_kept = after.runs[0].target_first
    for offset in range(first_kept, target + 5):
        assert to_source(after, offset) == to_source(before, offset)


def test_a_read_of_no_partition_reads_nothing(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path)
    append(warehouse, transactions("orders", 0, 5, 10), 1)
    history = read_history(warehouse, FLOW, Wanted({}), empty_tail())
    assert history.partitions == [] and history.runs.num_rows == 0
    assert read_history(Warehouse(tmp_path / "none"), FLOW, Wanted(every=True), empty_tail()).partitions == []


def test_the_history_table_keeps_its_commit_log_half_an_hour_and_older_tables_are_brought_to_it(
    tmp_path: Path,
) -> None:
    from deltalake import DeltaTable

    from srm.storage.warehouse import CONFIGURATION, apply_configuration

    warehouse = Warehouse(tmp_path / "new")
    append(warehouse, transactions("orders", 0, 10, 10), 1)
    opened = DeltaTable(warehouse.path(SYNC_HISTORY))
    assert opened.metadata().configuration["delta.logRetentionDuration"] == "interval 30 minutes"
    assert not apply_configuration(opened, SYNC_HISTORY)  # nothing to change

    old = tmp_path / "old" / SYNC_HISTORY  # as an earlier release created it: a day
    day = {"delta.logRetentionDuration": "interval 1 days"}
    DeltaTable.create(str(old), _schemas()[SYNC_HISTORY], partition_by=["flow"], configuration=day)
    assert apply_configuration(DeltaTable(str(old)), SYNC_HISTORY)
    assert DeltaTable(str(old)).metadata().configuration == CONFIGURATION[SYNC_HISTORY]


@pytest.mark.parametrize("seed", range(5))
def test_the_runs_around_a_few_positions_translate_them_as_all_the_runs_do(seed: int) -> None:
    rng = random.Random(seed)
    rows, source, target = [], 0, 0
    for history in range(2_000):
        source += rng.choice([0, 0, 0, 1, 3])  # gaps: aborted records and markers on the source
        length = rng.randint(1, 20)
        rows.append(row("t", 1, (source, target, length), history))
        source += length
        target += length + 1
    rows.append(row("u", 0, (0, 0, 5), 9_999))  # another partition beside it
    history = build_history(FLOW, table(rows).select(COLUMNS))
    positions = [rng.randint(0, source + 10) for _ in range(50)] + [0, source - 1, source, source + 10]
    around = history.around("t", 1, positions)
    assert len(around.runs) <= 3 * len(positions)  # a few runs each, not the window's 2,000
    whole = history.get("t", 1)
    assert around.next_offset == whole.next_offset
    assert [to_target(around, p) for p in positions] == [to_target(whole, p) for p in positions]
    assert history.around("none", 0, [5]).empty


def test_a_lookup_decodes_the_row_groups_of_its_window_not_the_partitions_whole_history(tmp_path: Path) -> None:
    import pyarrow.compute as pc

    warehouse = Warehouse(tmp_path)
    append(warehouse, transactions("orders", 0, 40_000, 10) + transactions("orders", 1, 40_000, 10), 1)
    wanted = [(("orders", 0), 390_000)]  # the last 1,000 runs of 40,000, and the first window's 100 below them
    lookback = history_module.LOOKBACKS[0]
    decoded = warehouse.scan(
        SYNC_HISTORY, pc.field("flow") == FLOW, COLUMNS, groups=PartitionGroups(wanted, history_module._from(lookback))
    )
    assert decoded.num_rows <= 16_384  # two row groups of 8 Ki rows of the 80,000, 40,000 of them this partition's
    history = read_history(warehouse, FLOW, Wanted(dict(wanted)), empty_tail())
    assert history.runs.num_rows == 1_000 + lookback // 10
    assert to_target(history.get("orders", 0), 395_005) == 39_500 * 11 + 5


def test_the_prunes_vacuum_deletes_data_files_no_commit_names_once_they_are_past_retention(tmp_path: Path) -> None:
    """A writer that died before its commit, or a tombstone a checkpoint dropped once it expired,
    leaves a data file that no commit names: a vacuum of the log's tombstones alone never deletes
    it, and the table's folder grows around a constant live table."""
    import os
    import time
    from types import SimpleNamespace

    from srm.offsets.retention import HistoryPruner

    warehouse = Warehouse(tmp_path)
    append(warehouse, transactions("orders", 0, 10, 10), 1)
    folder = next(Path(warehouse.path(SYNC_HISTORY)).glob("flow=*"))
    live = sorted(folder.glob("*.parquet"))
    old, fresh = folder / "part-00000-orphan-old.zstd.parquet", folder / "part-00000-orphan-new.zstd.parquet"
    for orphan in (old, fresh):
        orphan.write_bytes(live[0].read_bytes())
    hour_ago = time.time() - 3600
    os.utime(old, (hour_ago, hour_ago))  # the history table keeps deleted files 15 minutes
    config = SimpleNamespace(storage=SimpleNamespace(warehouse=tmp_path))
    pruner = HistoryPruner(config, SimpleNamespace(name=FLOW), source_admin=object(), target_admin=object())  # type: ignore[arg-type]
    assert pruner._vacuum() == 1
    assert not old.exists() and fresh.exists() and all(f.exists() for f in live)
    assert warehouse.scan(SYNC_HISTORY).num_rows == 10  # the live file is read as before


@pytest.mark.parametrize("in_tail", [False, True])
def test_a_window_holding_only_an_older_incarnation_reads_the_partition_whole(
    tmp_path: Path, monkeypatch: Any, in_tail: bool
) -> None:
    """A topic recreated and copied again from offset 0 while its old runs are not pruned yet, and a
    position from before (15,000, above every offset of the new incarnation): the window holds old
    runs alone. The latest rows (in the warehouse, or not ingested yet) decide, as in a whole read."""
    warehouse = Warehouse(tmp_path)
    old = transactions("orders", 0, 2_000, 10)  # id-1: offsets 0-20,000
    new = [row("orders", 0, (10 * i, 30_000 + 11 * i, 10), 10_000 + i, topic_id="id-2") for i in range(1_000)]
    append(warehouse, old if in_tail else old + new, 1)
    tail = table(new).select(COLUMNS) if in_tail else empty_tail()
    monkeypatch.setattr(history_module, "LOOKBACKS", (1_000, 10_000))
    history = read_history(warehouse, FLOW, Wanted({("orders", 0): 15_000}), tail)
    whole = read_history(warehouse, FLOW, Wanted.whole([("orders", 0)]), tail)
    assert history.topic_ids == whole.topic_ids == {("orders", 0): "id-2"}
    assert history.progress == whole.progress == {("orders", 0): 10_000}
    assert to_target(history.get("orders", 0), 15_000) == to_target(whole.get("orders", 0), 15_000) == 40_999


def test_the_sources_topic_ids_when_given_tell_which_windows_hold_an_older_incarnation(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A checkpoint pass knows the source's topic ids: a window of the current one is kept as read,
    one of another incarnation is read whole (no scan of the warehouse for other topic ids)."""
    warehouse = Warehouse(tmp_path)
    old = transactions("orders", 0, 2_000, 10)  # id-1: offsets 0-20,000
    new = [row("orders", 0, (10 * i, 30_000 + 11 * i, 10), 10_000 + i, topic_id="id-2") for i in range(1_000)]
    append(warehouse, old + new + transactions("audit", 0, 2_000, 10), 1)
    monkeypatch.setattr(history_module, "LOOKBACKS", (1_000, 10_000))
    scanned = []
    monkeypatch.setattr(history_module, "_other_incarnations", lambda *args: scanned.append(args) or [])
    wanted = Wanted({("orders", 0): 15_000, ("audit", 0): 15_000})
    history = read_history(warehouse, FLOW, wanted, empty_tail(), {"orders": "id-2", "audit": "id-1"})
    assert not scanned
    assert history.topic_ids == {("orders", 0): "id-2", ("audit", 0): "id-1"}
    assert to_target(history.get("orders", 0), 15_000) == 40_999
    _, count = history.spans[("audit", 0)]
    assert count == 600  # its window alone: from 14,000 on


def test_a_row_group_is_read_when_one_of_the_partitions_in_its_ranges_wants_its_offsets() -> None:
    """PartitionGroups against the same question asked of every partition, on row groups of
    every shape: one partition, a partition's boundary, a time-ordered append of many topics."""
    rng = random.Random(7)
    topics = [f"t{i:02d}" for i in range(12)]
    partitions = [(t, p) for t in topics for p in range(4) if rng.random() < 0.5]
    wanted = [(key, rng.choice([None, rng.randint(0, 50_000)])) for key in partitions]
    lookback = 1_000
    test = PartitionGroups(wanted, history_module._from(lookback))
    for _ in range(3_000):
        t1, t2 = sorted(rng.sample(topics, 2)) if rng.random() < 0.5 else [rng.choice(topics)] * 2
        p1, p2 = sorted(rng.choice([(0, 0), (0, 3), (1, 2), (rng.randint(0, 3),) * 2]))
        f1 = rng.randint(0, 60_000)
        bounds = {"topic": (t1, t2), "partition": (p1, p2), "source_first": (f1, f1 + rng.randint(0, 20_000))}
        expected = any(
            t1 <= t <= t2 and p1 <= p <= p2 and (low is None or bounds["source_first"][1] >= low - lookback)
            for (t, p), low in wanted
        )
        assert test(bounds) == expected, bounds
    assert test({"partition": (0, 3)}), "no topic statistics: the row group may hold anything"
    assert not PartitionGroups([], history_module._from(lookback))({"topic": ("a", "z"), "partition": (0, 9)})


def test_a_row_group_of_one_topic_id_holds_no_other_incarnation() -> None:
    test = PartitionGroups([(("orders", 0), "id-new")], history_module._another_id)
    assert not test({"topic": ("orders", "orders"), "partition": (0, 0), "topic_id": ("id-new", "id-new")})
    assert test({"topic": ("orders", "orders"), "partition": (0, 0), "topic_id": ("id-new", "id-old")})
    assert test({"topic": ("orders", "orders"), "partition": (0, 1)})  # no topic id statistics
    assert not test({"topic": ("payments", "payments"), "partition": (0, 0), "topic_id": ("x", "y")})


ALLOCATOR_CHECK = """
import sys
import pyarrow as pa
from srm.offsets.history import Wanted, read_history
from srm.storage.warehouse import SYNC_HISTORY, Warehouse
sys.path.insert(0, sys.argv[2])
from test_history_store import append, empty_tail, transactions
warehouse = Warehouse(sys.argv[1])
append(warehouse, transactions("orders", 0, 5_000, 3), 1)
before = pa.mimalloc_memory_pool().bytes_allocated()
history = read_history(warehouse, "west->east", Wanted.lowest([(("orders", 0), 0)]), empty_tail())
print(pa.default_memory_pool().backend_name, history.runs.num_rows, pa.system_memory_pool().bytes_allocated(),
      pa.mimalloc_memory_pool().bytes_allocated() - before)
"""


def test_a_process_that_opens_the_warehouse_reads_into_glibc_buffers(tmp_path: Path) -> None:
    """Arrow's own allocator (mimalloc) kept tens of MiB more at a checkpoint pass's peak: a process
    that opens the warehouse reads history into buffers of glibc's malloc (a fresh process: the
    allocator is chosen once per process)."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", ALLOCATOR_CHECK, str(tmp_path / "wh"), str(Path(__file__).parent)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.split()
    assert out[0] == "system"
    assert int(out[1]) == 5_000  # the runs read are held in these buffers
    assert int(out[2]) >= 5_000 * 8 * 3  # at least their three offset columns
    assert int(out[3]) == 0  # nothing of the read from mimalloc
