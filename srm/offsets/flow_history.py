"""The runs of a flow's sync history that a read found, as translation uses them.

:func:`build_history` makes a :class:`FlowHistory` of history rows (Arrow): each partition's
current topic incarnation, its runs distinct and sorted, and its progress; :mod:`.history` decides
which rows to read.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from srm.offsets.translate import PartitionHistory
from srm.replication.runs import OffsetRun

Key = tuple[str, int]
RUN_COLUMNS = ["topic", "partition", "source_first", "target_first", "length"]


@dataclass(frozen=True)
class FlowHistory:
    """The current incarnation's runs of the partitions read: Arrow, distinct, sorted by topic,
    partition and source offset; and per partition the flow's progress (next source offset)."""

    flow: str
    runs: Any  # pyarrow.Table of RUN_COLUMNS
    progress: dict[Key, int]
    spans: dict[Key, tuple[int, int]]  # a partition's rows in ``runs``: (first index, count)
    topic_ids: dict[Key, str]  # the current incarnation's topic id

    @property
    def partitions(self) -> list[Key]:
        """The partitions the history holds anything of (runs or progress alone)."""
        return sorted(self.progress)

    def copied(self) -> set[Key]:
        """The partitions with at least one copied record."""
        return set(self.spans)

    def get(self, topic: str, partition: int) -> PartitionHistory:
        key = (topic, partition)
        first, count = self.spans.get(key, (0, 0))
        part = self.runs.slice(first, count).to_pydict() if count else {c: [] for c in RUN_COLUMNS}
        runs = [
            OffsetRun(s, t, n)
            for s, t, n in zip(part["source_first"], part["target_first"], part["length"], strict=True)
        ]
        return PartitionHistory.of(runs, self.progress.get(key))

    def around(self, topic: str, partition: int, positions: Iterable[int]) -> PartitionHistory:
        """The runs ``to_target`` needs for the source offsets ``positions`` (for each, the run
        holding it or the last one before it, and the one after it; and the partition's last):
        every ``to_target`` of those offsets gives what it gives over :meth:`get`'s runs, without a
        Python object for every run of the window (a pass over groups that lag by minutes reads
        hundreds of thousands of runs and translates a few per group)."""
        key = (topic, partition)
        first, count = self.spans.get(key, (0, 0))
        if not count:
            return self.get(topic, partition)
        window = self.runs.slice(first, count)
        firsts = window["source_first"].to_pylist()
        needed = {count - 1}
        for position in positions:
            index = bisect.bisect_right(firsts, position) - 1
            needed.update(i for i in (index, index + 1) if 0 <= i < count)
        part = window.take(sorted(needed)).to_pydict()
        runs = [
            OffsetRun(s, t, n)
            for s, t, n in zip(part["source_first"], part["target_first"], part["length"], strict=True)
        ]
        return PartitionHistory.of(runs, self.progress.get(key))

    def progress_table(self) -> Any:
        """(topic, partition, next_offset) of every partition, for Spark."""
        import pyarrow as pa

        keys = sorted(self.progress)
        return pa.table(
            {
                "topic": pa.array([t for t, _ in keys], pa.string()),
                "partition": pa.array([p for _, p in keys], pa.int32()),
                "next_offset": pa.array([self.progress[k] for k in keys], pa.int64()),
            }
        )


def _latest(rows: Any) -> Any:
    """(topic, partition, topic_id) of each partition's latest row (highest history offset)."""
    newest = rows.group_by(["topic", "partition"], use_threads=False).aggregate([("history_offset", "max")])
    newest = newest.rename_columns(["topic", "partition", "history_offset"])
    latest = rows.join(newest, ["topic", "partition", "history_offset"], join_type="inner", use_threads=False)
    return latest.group_by(["topic", "partition", "topic_id"], use_threads=False).aggregate([])


def build_history(flow: str, rows: Any) -> FlowHistory:
    """The history of ``rows`` (Arrow, COLUMNS): each partition's current incarnation, runs distinct
    (a replayed ingest may repeat rows: a run is identified by its offsets) and sorted."""
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return FlowHistory(flow, rows.select(RUN_COLUMNS), {}, {}, {})
    latest = _latest(rows)
    topic_ids = {
        (t, p): i
        for t, p, i in zip(
            latest["topic"].to_pylist(), latest["partition"].to_pylist(), latest["topic_id"].to_pylist(), strict=True
        )
    }
    current = rows.join(latest, ["topic", "partition", "topic_id"], join_type="inner", use_threads=False)
    ends = current.group_by(["topic", "partition"], use_threads=False).aggregate([("next_offset", "max")])
    progress = {
        (t, p): n
        for t, p, n in zip(
            ends["topic"].to_pylist(), ends["partition"].to_pylist(), ends["next_offset_max"].to_pylist(), strict=True
        )
    }
    copied = current.filter(pc.field("length") > 0).select(RUN_COLUMNS)
    runs = copied.group_by(RUN_COLUMNS, use_threads=False).aggregate([])
    runs = runs.sort_by([("topic", "ascending"), ("partition", "ascending"), ("source_first", "ascending")])
    return FlowHistory(flow, runs, progress, partition_spans(runs), topic_ids)


def partition_spans(runs: Any) -> dict[Key, tuple[int, int]]:
    """Where each partition's rows are in ``runs`` (sorted by topic and partition)."""
    spans: dict[Key, tuple[int, int]] = {}
    if runs.num_rows == 0:
        return spans
    counts = runs.group_by(["topic", "partition"], use_threads=False).aggregate([("length", "count")])
    counts = counts.sort_by([("topic", "ascending"), ("partition", "ascending")])
    first = 0
    for topic, partition, count in zip(
        counts["topic"].to_pylist(), counts["partition"].to_pylist(), counts["length_count"].to_pylist(), strict=True
    ):
        spans[(topic, partition)] = (first, count)
        first += count
    return spans
