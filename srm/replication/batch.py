"""One micro-batch on the driver (``foreachBatch``): topics ready, copy job, accounting, one log line.

1. Remote topics for every planned range exist with the right partitions (created or grown).
2. The ranges are grouped by transactional slot (a stable hash of topic and partition, so the
   same partition always belongs to the same slot and a zombie is always fenced) and copied by a
   Spark job with one task per slot.
3. MM2 offset syncs go to the source's ``mm2-offset-syncs.<target>.internal`` (when that is where
   they live; on the target they were written in the transactions), metrics and losses to the
   warehouse, the exact history from its topic into the warehouse.
4. One readable line is logged. Losses under ``on_data_loss: fail`` stop the flow here.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
import zlib
from collections import defaultdict
from concurrent import futures
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from srm import clients
from srm.config import load_config
from srm.config.model import Flow, SrmConfig
from srm.errors import DataLossError
from srm.internal_topics import history_topic_name, mm2_offset_syncs_topic
from srm.records import OffsetSync
from srm.replication.copier import run_slot
from srm.replication.history import HistoryIngest
from srm.replication.job import CopyJob, CopyRange, Loss
from srm.replication.remote_topics import RemoteTopics
from srm.replication.runs import OffsetRun, mm2_syncs
from srm.replication.source import range_from_row
from srm.topics import list_offsets, partition_counts
from srm.warehouse import DATA_LOSS, METRICS, Warehouse

log = logging.getLogger("srm.replicate")
SLOT_VARIABLE = "SRM_COPY_SLOT"


class Phases:
    """Wall time of the steps of a batch, for the batch's log line."""

    def __init__(self) -> None:
        self.started = self.last = time.monotonic()
        self.laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps.append((name, now - self.last))
        self.last = now

    @property
    def total(self) -> float:
        return self.last - self.started

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.laps)


def slot_of(topic: str, partition: int, slots: int) -> int:
    """Stable across processes and restarts (Python's own hash() is salted per process)."""
    return zlib.crc32(f"{topic}\x00{partition}".encode()) % slots


class BatchRunner:
    def __init__(self, spark: Any, config: SrmConfig, flow: Flow, checkpoint_dir: str) -> None:
        self.spark = spark
        self.config = config
        self.flow = flow
        self.checkpoint_dir = checkpoint_dir
        self.source = config.cluster(flow.source)
        self.target = config.cluster(flow.target)
        self.source_admin = clients.admin_client(self.source)
        self.target_admin = clients.admin_client(self.target)
        self.remote_topics = RemoteTopics(flow, self.target, self.source_admin, self.target_admin)
        self.warehouse = Warehouse(config.storage.warehouse)
        self.history_topic = history_topic_name(flow)
        self.history = HistoryIngest(self.warehouse, flow, self.target, self.history_topic, self.target_admin)
        self._query_id: str | None = None
        # Warehouse appends are idempotent per (query, this run, batch): a batch replayed after a
        # restart describes what the replay did (usually nothing left to copy), never double counts.
        self.run_id = uuid.uuid4().hex[:12]
        self._accounting = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="srm-accounting")
        self._pending: list[futures.Future[None]] = []
        self._sync_producer: Any = None
        self._config_mtime = Path(config.file).stat().st_mtime if Path(config.file).exists() else 0.0
        self.totals = {"batches": 0, "records": 0, "bytes": 0}

    def __call__(self, frame: Any, batch_id: int) -> None:
        phases = Phases()
        ranges = [range_from_row(row) for row in frame.collect()]
        log.debug("flow %s batch %d plan: %s", self.flow.name, batch_id, ranges)
        if not ranges:
            return
        phases.lap("plan")
        self._reload()
        counts = partition_counts(self.source_admin, include_internal=True)
        self.remote_topics.ensure({r.topic: counts.get(r.topic, r.partition + 1) for r in ranges})
        phases.lap("topics")
        payloads = self._copy(batch_id, ranges)
        phases.lap("copy")
        losses = [Loss(**loss) for p in payloads for loss in p["losses"]]
        # Syncs, metrics and history go to their stores in the background, in batch order, so
        # the next batch does not wait for them; a stop drains them first (see close()).
        self._pending.append(self._accounting.submit(self._account, batch_id, payloads, losses))
        self._log(batch_id, ranges, payloads, phases)
        if losses and self.flow.settings.on_data_loss == "fail":
            self.close()
            listed = "; ".join(str(loss) for loss in losses)
            raise DataLossError(
                f"flow {self.flow.name} stopped (on_data_loss: fail): {listed}. The target holds everything "
                "before these offsets; set on_data_loss: continue for this flow to skip them and go on"
            )

    def _reload(self) -> None:
        path = Path(self.config.file)
        mtime = path.stat().st_mtime if path.exists() else 0.0
        if mtime == self._config_mtime:
            return
        self._config_mtime = mtime
        try:
            config = load_config(path, strict=True)
            self.flow = config.flow(self.flow.source, self.flow.target)
            self.config = config
            self.remote_topics.flow = self.flow
            log.info("flow %s: configuration %s reloaded", self.flow.name, path)
        except Exception as exc:
            log.error("configuration %s changed but is invalid; keeping the previous one: %s", path, exc)

    # --- the copy job -------------------------------------------------------------------------
    def jobs(self, ranges: list[CopyRange]) -> list[CopyJob]:
        slots = self.flow.settings.tasks_max
        grouped: dict[int, list[CopyRange]] = defaultdict(list)
        for r in ranges:
            grouped[slot_of(r.topic, r.partition, slots)].append(r)
        mm2 = mm2_offset_syncs_topic(self.flow)
        on_target = self.flow.settings.emit_offset_syncs_enabled and mm2.cluster == self.flow.target
        return [
            CopyJob(
                self.flow,
                self.source,
                self.target,
                slot,
                tuple(rs),
                self.history_topic,
                mm2.name if on_target else None,
            )
            for slot, rs in sorted(grouped.items())
        ]

    def _copy(self, batch_id: int, ranges: list[CopyRange]) -> list[dict[str, Any]]:
        jobs = self.jobs(ranges)
        context = self.spark.sparkContext
        context.setJobDescription(
            f"flow {self.flow.name} batch {batch_id}: {len(ranges)} partition(s), {len(jobs)} slot(s)"
        )
        rdds = [self._slot_rdd(context, job) for job in jobs]
        rdd = rdds[0] if len(rdds) == 1 else context.union(rdds)
        payloads: list[dict[str, Any]] = rdd.collect()
        return payloads

    def _slot_rdd(self, context: Any, job: CopyJob) -> Any:
        """One task per slot, in a Python worker of the slot's own.

        Spark keeps a pool of Python workers per distinct environment, so a variable naming the
        slot pins it to one worker, whose transactional producer stays initialised between
        batches: re-initialising a producer that just committed costs about 0.5 s (the broker
        finishes the previous transaction first), on every batch the slot changed workers.
        """
        context.environment[SLOT_VARIABLE] = f"{self.flow.name}#{job.slot}"
        try:
            rdd = context.parallelize([job], 1).flatMap(run_slot)
            rdd._jrdd  # noqa: B018 - builds the Java RDD now, capturing this environment
        finally:
            context.environment.pop(SLOT_VARIABLE, None)
        return rdd

    # --- after the copy -----------------------------------------------------------------------
    def _emit_mm2_syncs(self, payloads: list[dict[str, Any]]) -> None:
        topic = mm2_offset_syncs_topic(self.flow)
        if not self.flow.settings.emit_offset_syncs_enabled or topic.cluster != self.flow.source:
            return
        if self._sync_producer is None:
            self._sync_producer = clients.producer(self.source, **{"enable.idempotence": True})
        for payload in payloads:
            row = payload["row"]
            runs = [OffsetRun(*run) for run in payload["runs"]]
            for upstream, downstream in mm2_syncs(runs):
                sync = OffsetSync(row["topic"], row["partition"], upstream, downstream)
                self._sync_producer.produce(topic.name, **sync.as_produce_kwargs())
        if self._sync_producer.flush(30):
            log.warning("some MM2 offset syncs to %s on %s were not acknowledged", topic.name, self.flow.source)

    def _account(self, batch_id: int, payloads: list[dict[str, Any]], losses: list[Loss]) -> None:
        try:
            self._emit_mm2_syncs(payloads)
            self._record(batch_id, payloads, losses)
        except Exception:  # the copy is committed; accounting is retried with the next batch's history
            log.exception("flow %s batch %d: writing syncs, metrics or history failed", self.flow.name, batch_id)

    def close(self, timeout_s: float = 120.0) -> None:
        """Wait until every batch's accounting is written."""
        pending, self._pending = self._pending, []
        futures.wait(pending, timeout=timeout_s)

    def _record(self, batch_id: int, payloads: list[dict[str, Any]], losses: list[Loss]) -> None:
        query = self.query_id()
        ends = list_offsets(self.source_admin, [(p["row"]["topic"], p["row"]["partition"]) for p in payloads], "latest")
        rows = [self._metrics_row(batch_id, query, p["row"], ends) for p in payloads]
        self.warehouse.append(METRICS, rows, f"metrics:{self.flow.name}:{query}:{self.run_id}", batch_id + 1)
        if losses:
            now = datetime.now(UTC)
            loss_rows = [
                {
                    "flow": self.flow.name,
                    "topic": loss.topic,
                    "partition": loss.partition,
                    "first_offset": loss.first,
                    "end_offset": loss.end,
                    "records": loss.end - loss.first,
                    "reason": loss.reason,
                    "policy": self.flow.settings.on_data_loss,
                    "detected_at": now,
                }
                for loss in losses
            ]
            self.warehouse.append(DATA_LOSS, loss_rows, f"loss:{self.flow.name}:{query}:{self.run_id}", batch_id + 1)
        self.history.ingest()

    def _metrics_row(
        self, batch_id: int, query: str, row: dict[str, Any], ends: dict[tuple[str, int], int]
    ) -> dict[str, Any]:
        end = ends.get((row["topic"], row["partition"]), row["planned_end"])
        data = {k: v for k, v in row.items() if k not in ("started_ms", "finished_ms")}
        return {
            **data,
            "flow": self.flow.name,
            "batch_id": batch_id,
            "query_id": query,
            "source_end": end,
            "lag": max(0, end - row["next_offset"]),
            "started_at": datetime.fromtimestamp(row["started_ms"] / 1000, UTC),
            "finished_at": datetime.fromtimestamp(row["finished_ms"] / 1000, UTC),
        }

    def query_id(self) -> str:
        """The id Spark keeps in the checkpoint: stable across restarts, new when it is deleted."""
        if self._query_id is None:
            metadata = Path(self.checkpoint_dir.removeprefix("file:")) / "metadata"
            try:
                self._query_id = str(json.loads(metadata.read_text())["id"])
            except (OSError, ValueError, KeyError):
                self._query_id = f"run-{int(time.time())}"
        return self._query_id

    def _log(self, batch_id: int, ranges: list[CopyRange], payloads: list[dict[str, Any]], phases: Phases) -> None:
        rows = [p["row"] for p in payloads]
        records = sum(r["records"] for r in rows)
        size = sum(r["bytes"] for r in rows)
        moved = sum(1 for r in rows if r["records"])
        p99 = max((r["latency_p99_ms"] or 0 for r in rows), default=0)
        lag = sum(max(0, r["planned_end"] - r["next_offset"]) for r in rows)
        self.totals["batches"] += 1
        self.totals["records"] += records
        self.totals["bytes"] += size
        seconds = phases.total
        rate = records / seconds if seconds else 0
        log.info(
            "flow %s batch %d: %d record(s), %.1f MiB from %d of %d partition(s) in %.1f s (%.0f records/s; %s), "
            "latency p99 %.0f ms, lag %d",
            *(self.flow.name, batch_id, records, size / 2**20, moved, len(ranges), seconds, rate, phases, p99, lag),
        )
