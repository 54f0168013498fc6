"""A flow's exact sync history, as the checkpoint job and the translation API need it.

Rows come from the warehouse table ``offset_sync_history`` plus the tail of the history topic
that the replication job has committed but not yet moved to the warehouse, so translation always
sees every transaction committed so far. Only the runs of a partition's current topic
incarnation (its latest topic id) count: offsets restart when a topic is recreated.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from srm import clients
from srm.config.model import Flow, SrmConfig
from srm.internal_topics import history_topic_name
from srm.offsets.translate import PartitionHistory
from srm.replication.history import HistoryIngest
from srm.replication.runs import OffsetRun
from srm.warehouse import SYNC_HISTORY, Warehouse

Key = tuple[str, int]


@dataclass(frozen=True)
class FlowHistory:
    flow: str
    partitions: dict[Key, PartitionHistory]
    rows: list[dict[str, Any]]  # current-incarnation runs, one dict per run (for Spark)

    def get(self, topic: str, partition: int) -> PartitionHistory:
        return self.partitions.get((topic, partition), PartitionHistory.of([]))


def load_history(config: SrmConfig, flow: Flow) -> FlowHistory:
    """Every run of ``flow`` committed so far (warehouse + history topic tail)."""
    return build_history(flow.name, history_rows(config, flow))


def history_rows(config: SrmConfig, flow: Flow) -> list[dict[str, Any]]:
    """The flow's history rows: the warehouse table plus the topic's tail not ingested yet."""
    warehouse = Warehouse(config.storage.warehouse)
    target = config.cluster(flow.target)
    ingest = HistoryIngest(warehouse, flow, target, history_topic_name(flow), clients.admin_client(target))
    try:
        _, _, tail = ingest.tail()
    finally:
        ingest.close()
    return warehouse.read(SYNC_HISTORY, flow=flow.name) + tail


def recorded_progress(config: SrmConfig, flow: Flow) -> dict[Key, tuple[int, str]]:
    """Per source partition, (next offset, topic id) of the latest transaction the history holds:
    the same progress the transaction wrote to the progress topic, kept for good."""
    latest: dict[Key, dict[str, Any]] = {}
    for row in history_rows(config, flow):
        key = (row["topic"], row["partition"])
        if key not in latest or row["history_offset"] > latest[key]["history_offset"]:
            latest[key] = row
    return {key: (row["next_offset"], row["topic_id"]) for key, row in latest.items()}


def build_history(flow: str, rows: list[dict[str, Any]]) -> FlowHistory:
    by_partition: dict[Key, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_partition[(row["topic"], row["partition"])].append(row)
    partitions, current_rows = {}, []
    for key, entries in by_partition.items():
        latest = max(entries, key=lambda r: r["history_offset"])
        current = [r for r in entries if r["topic_id"] == latest["topic_id"]]
        # A replayed ingest may repeat rows: a run is identified by its offsets.
        runs = {(r["source_first"], r["target_first"], r["length"]) for r in current if r["length"] > 0}
        progress = max(r["next_offset"] for r in current)
        partitions[key] = PartitionHistory.of([OffsetRun(*run) for run in runs], progress)
        current_rows += [
            {"topic": key[0], "partition": key[1], "source_first": s, "target_first": t, "length": n}
            for s, t, n in sorted(runs)
        ]
    return FlowHistory(flow, partitions, current_rows)
