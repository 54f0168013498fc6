"""What the soak measures of the sync history: its rows of the partitions that have lived their
retention, the time they span, and whether the prune left nothing below the source's log start."""

from __future__ import annotations

from typing import Any

from srm.kafka.partitions import list_offsets
from srm.storage.warehouse import SYNC_HISTORY, Warehouse


def log_starts(warehouse: Warehouse, flow: str, source_admin: Any) -> dict[tuple[str, int], int]:
    """The source's log-start offset of every partition the flow's history names."""
    rows = warehouse.read(SYNC_HISTORY, flow=flow)
    keys = sorted({(r["topic"], r["partition"]) for r in rows})
    return list_offsets(source_admin, keys, "earliest")


def history_span_min(rows: Any, settled: set[tuple[str, int]]) -> float | None:
    """The time the history of the ``settled`` partitions spans: minutes from the oldest row's
    commit to the newest row's, of the partition whose history reaches back furthest."""
    if not settled or rows.num_rows == 0:
        return None
    spans = rows.group_by(["topic", "partition"]).aggregate([("committed_at", "min"), ("committed_at", "max")])
    newest = max((r["committed_at_max"] for r in spans.to_pylist() if r["committed_at_max"] is not None), default=None)
    oldest = [
        r["committed_at_min"]
        for r in spans.to_pylist()
        if (r["topic"], r["partition"]) in settled and r["committed_at_min"] is not None
    ]
    if newest is None or not oldest:
        return None
    return round(float((newest - min(oldest)).total_seconds()) / 60, 1)


def settled_rows(rows: Any, settled: set[tuple[str, int]]) -> int:
    """How many of the history's ``rows`` (topic, partition) are of the ``settled`` partitions."""
    counts = rows.group_by(["topic", "partition"]).aggregate([([], "count_all")]).to_pylist()
    return sum(c["count_all"] for c in counts if (c["topic"], c["partition"]) in settled)


def history_pruned(warehouse: Warehouse, flow: str, starts: dict[tuple[str, int], int]) -> bool:
    """Does the flow's history hold nothing below the source's log-start offsets ``starts`` (read
    before the prune; each partition's latest row aside, which holds the progress), with the
    source having deleted records?"""
    rows = warehouse.read(SYNC_HISTORY, flow=flow)
    if not any(starts.values()):
        return False  # retention deleted nothing: there was nothing to prune
    latest: dict[tuple[str, int], int] = {}
    for r in rows:
        key = (r["topic"], r["partition"])
        latest[key] = max(latest.get(key, -1), r["history_offset"])
    below = [
        r
        for r in rows
        if r["source_first"] + r["length"] <= starts.get((r["topic"], r["partition"]), 0)
        and r["history_offset"] != latest[(r["topic"], r["partition"])]
    ]
    return not below
