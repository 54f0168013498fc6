"""After a batch or lease is copied (driver side): MM2 offset syncs, metrics, losses, history.

MM2 offset syncs go to the source's ``mm2-offset-syncs.<target>.internal`` (when that is where
they live; on the target they were written in the transactions), metrics and losses to the
warehouse, the exact history from its topic into the warehouse. All of it runs in a background
thread, in batch order, so the next batch does not wait; ``close()`` drains it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from srm.config.model import Cluster, Flow, SrmConfig
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.internal_topics import history_topic_name, mm2_offset_syncs_topic
from srm.kafka.partitions import list_offsets
from srm.mm2.records import OffsetSync
from srm.replication.history import HistoryIngest
from srm.replication.job import Loss
from srm.replication.progress import Progress
from srm.replication.runs import OffsetRun, SyncPacer
from srm.storage.warehouse import DATA_LOSS, METRICS, SYNC_HISTORY, Warehouse, sql_string

log = logging.getLogger("srm.replicate")
# commit_transaction returns once the coordinator has logged the commit; the markers that let
# read_committed readers see the history records follow asynchronously (tens of ms, longer on a
# busy machine). The final ingest waits that long at most, so a run's warehouse is complete when
# it ends; past it, the next run ingests the rest.
SETTLE_AT_SHUTDOWN_S = 10.0


@dataclass
class Phases:
    """Wall time of the steps of a batch, for the batch's log line, and the CPU time the process
    used meanwhile (all its threads)."""

    started: float = field(default_factory=time.monotonic)
    last: float = 0.0
    laps: list[tuple[str, float]] = field(default_factory=list)
    cpu_started: float = field(default_factory=time.process_time)
    cpu_last: float = 0.0

    def __post_init__(self) -> None:
        self.last = self.started
        self.cpu_last = self.cpu_started

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps.append((name, now - self.last))
        self.last = now
        self.cpu_last = time.process_time()

    @property
    def total(self) -> float:
        return self.last - self.started

    @property
    def cpu(self) -> float:
        """CPU seconds of the process from the start to the last lap: with ``total``, whether a
        slow step worked or waited (for a broker, or for a core on a busy machine)."""
        return self.cpu_last - self.cpu_started

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.laps)


@dataclass(frozen=True)
class BatchLine:
    """What a batch's log line names besides its payloads."""

    what: str  # "batch 3", "lease 12"
    batch_id: int
    partitions: int  # planned
    phases: Phases


class Accounting:
    def __init__(
        self, config: SrmConfig, flow: Flow, query_id: str, run_id: str, *, source_admin: Any, target_admin: Any
    ) -> None:
        """``query_id``: the plan log's (stable across restarts); ``source_admin``/``target_admin``:
        the runner's admin clients (thread-safe), shared."""
        self.flow = flow
        self.query_id = query_id
        self.run_id = run_id
        self.source = config.cluster(flow.source)
        self.target = config.cluster(flow.target)
        self.source_admin = source_admin
        self.warehouse = Warehouse(config.storage.warehouse)
        self.history = HistoryIngest(self.warehouse, flow, self.target, history_topic_name(flow), target_admin)
        self._pool = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="srm-accounting")
        self._pending: list[futures.Future[None]] = []
        self._sync_producer: Any = None
        self._pacers: dict[tuple[str, int], SyncPacer] = {}
        self.totals = {"batches": 0, "records": 0, "bytes": 0}
        self._gone = 0  # version of the loss rows of deleted remote topics (Warehouse.append)
        self._closed = False

    def use_clients(self, source: Cluster, target: Cluster, source_admin: Any, target_admin: Any) -> None:
        """Clients built from the clusters' new settings, taken up between two batches' accounting."""

        def swap() -> None:
            self.source, self.target, self.source_admin = source, target, source_admin
            self._sync_producer = None  # built again on first use
            self.history.close()
            self.history.target, self.history.admin = target, target_admin

        self._pending.append(self._pool.submit(swap))

    def submit(self, batch: BatchLine, payloads: list[dict[str, Any]], losses: list[Loss], *, lease: bool) -> None:
        """The batch's accounting, in the background, in batch order: its log line, then what it
        writes. ``lease``: the payloads of a lease (open ranges), each given its partition's end on
        the source now, and the idle, caught-up ones left out."""
        self._pending = [f for f in self._pending if not f.done()]
        self._pending.append(self._pool.submit(self._account, batch, payloads, losses, lease))

    def forget(self, gone: dict[tuple[str, int], Progress], remote: Callable[[str], str]) -> None:
        """Remote topics of ``gone`` (source partition -> committed progress) were deleted from the
        target: their sync history maps offsets to a topic that no longer exists, so translation
        must not use it. After every batch's accounting, the history is ingested to the end of its
        topic and the partitions' rows are deleted; the records copied before are recorded as lost
        on the target. ``remote``: a source topic's remote topic."""
        self._pending.append(self._pool.submit(self._forget, gone, remote))
        futures.wait(self._pending)
        self._pending[-1].result()  # raised here: the flow does not copy on with the old history

    def _forget(self, gone: dict[tuple[str, int], Progress], remote: Callable[[str], str]) -> None:
        import pyarrow.compute as pc

        self.history.ingest()
        topics = sorted({t for t, _ in gone})
        sql = f"flow = {sql_string(self.flow.name)} AND topic IN ({', '.join(sql_string(t) for t in topics)})"
        arrow = (pc.field("flow") == self.flow.name) & pc.field("topic").isin(topics)
        rows = self.warehouse.scan(SYNC_HISTORY, arrow)
        first: dict[tuple[str, int], int] = {}
        if rows is not None and rows.num_rows:
            for row in rows.select(["topic", "partition", "source_first"]).to_pylist():
                key = (row["topic"], row["partition"])
                first[key] = min(first.get(key, row["source_first"]), row["source_first"])
            kept = rows.filter(~_partition_in(list(gone)))  # the topics' other partitions (not deleted)
            self.warehouse.replace(SYNC_HISTORY, kept, sql)
        losses = [
            Loss(
                t,
                p,
                min(first.get((t, p), progress.next_offset), progress.next_offset),
                progress.next_offset,
                f"were lost on {self.flow.target} when remote topic {remote(t)!r} was deleted there",
            )
            for (t, p), progress in sorted(gone.items())
        ]
        app = f"loss:{self.flow.name}:gone:{self.run_id}"
        self.warehouse.append(DATA_LOSS, self._loss_rows(losses), app, self._gone)
        self._gone += 1

    def close(self, timeout_s: float = 120.0) -> None:
        """Wait until every batch's accounting is written, then ingest the history once more, so a
        batch whose ingest failed (and that no later batch retried) is in the warehouse when the
        run ends."""
        if self._closed:  # a run that failed in its batch closes it there, then once more as it ends
            return
        self._closed = True
        pending, self._pending = self._pending, []
        pending.append(self._pool.submit(self._catch_up))
        _, late = futures.wait(pending, timeout=timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)  # what has not started yet, the next run does
        if late:
            log.error(
                "flow %s: accounting still running after %.0f s at shutdown; the next run ingests the history",
                *(self.flow.name, timeout_s),
            )

    def _catch_up(self) -> None:
        try:
            self.history.ingest(settle_s=SETTLE_AT_SHUTDOWN_S)
        except Exception:
            log.exception("flow %s: ingesting the sync history at shutdown failed", self.flow.name)
        finally:
            self.history.close()

    def _account(self, batch: BatchLine, payloads: list[dict[str, Any]], losses: list[Loss], lease: bool) -> None:
        # The copy is committed whatever fails here; each step is tried on its own, and the history
        # (read from its topic) is ingested again by the next batch and at shutdown.
        batch_id = batch.batch_id
        ends = self._source_ends(batch_id, payloads)
        if lease:
            payloads = moved_or_behind(payloads, ends or {})
        try:
            self.log_line(batch, payloads)
        except Exception:
            log.exception("flow %s batch %d: writing its log line failed", self.flow.name, batch_id)
        steps = (
            ("MM2 offset syncs", lambda: self._emit_mm2_syncs(payloads)),
            ("metrics and losses", lambda: self._record(batch_id, payloads, losses, ends)),
            ("sync history", self.history.ingest),
        )
        for what, step in steps:
            try:
                step()
            except Exception:
                log.exception("flow %s batch %d: writing the %s failed", self.flow.name, batch_id, what)

    def _emit_mm2_syncs(self, payloads: list[dict[str, Any]]) -> None:
        topic = mm2_offset_syncs_topic(self.flow)
        if not self.flow.settings.emit_offset_syncs_enabled or topic.cluster != self.flow.source:
            return
        if self._sync_producer is None:
            self._sync_producer = clients.producer(self.source, **{"enable.idempotence": True})
        for payload in payloads:
            row = payload["row"]
            runs = [OffsetRun(*run) for run in payload["runs"]]
            key = (row["topic"], row["partition"])
            pacer = self._pacers.setdefault(key, SyncPacer(self.flow.settings.offset_lag_max))
            for upstream, downstream in pacer.syncs(runs):
                sync = OffsetSync(row["topic"], row["partition"], upstream, downstream)
                self._sync_producer.produce(topic.name, **sync.as_produce_kwargs())
        if self._sync_producer.flush(30):
            log.warning("some MM2 offset syncs to %s on %s were not acknowledged", topic.name, self.flow.source)

    def _source_ends(self, batch_id: int, payloads: list[dict[str, Any]]) -> dict[tuple[str, int], int] | None:
        """Each payload partition's end on the source now, for its lag (a topic deleted since: left
        out); None when the source does not answer."""
        keys = [(p["row"]["topic"], p["row"]["partition"]) for p in payloads]
        try:
            return list_offsets(self.source_admin, keys, "latest", gone_ok=True) if keys else {}
        except SrmError as exc:
            log.warning("flow %s batch %d: no lag and no metrics rows this time: %s", self.flow.name, batch_id, exc)
        except Exception:  # the batch's other accounting (syncs, losses, history) goes on
            log.exception("flow %s batch %d: asking the source's end offsets failed", self.flow.name, batch_id)
        return None

    def _record(
        self,
        batch_id: int,
        payloads: list[dict[str, Any]],
        losses: list[Loss],
        ends: dict[tuple[str, int], int] | None,
    ) -> None:
        query = self.query_id
        app = f"{self.flow.name}:{query}:{self.run_id}"
        rows = [self._metrics_row(batch_id, query, p["row"], ends) for p in payloads] if ends is not None else []
        if rows:
            self.warehouse.append(METRICS, rows, f"metrics:{app}", batch_id + 1)
        if losses:
            self.warehouse.append(DATA_LOSS, self._loss_rows(losses), f"loss:{app}", batch_id + 1)

    def _loss_rows(self, losses: list[Loss]) -> list[dict[str, Any]]:
        now = datetime.now(UTC)
        return [
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

    def log_line(self, batch: BatchLine, payloads: list[dict[str, Any]]) -> None:
        """One readable line per batch or lease: records, MiB, partitions, rate, latency, lag."""
        what, partitions, phases = batch.what, batch.partitions, batch.phases
        rows = [p["row"] for p in payloads]
        records = sum(r["records"] for r in rows)
        size = sum(r["bytes"] for r in rows)
        moved = sum(1 for r in rows if r["records"])
        p99 = max((r["latency_p99_ms"] or 0 for r in rows), default=0)
        lag = sum(max(0, r["planned_end"] - r["next_offset"]) for r in rows)
        transactions = max((r["transactions"] for r in rows), default=0)
        self.totals["batches"] += 1
        self.totals["records"] += records
        self.totals["bytes"] += size
        seconds = phases.total
        rate = records / seconds if seconds else 0
        log.info(
            "flow %s %s: %d record(s), %.1f MiB from %d of %d partition(s) in %.1f s (%.0f records/s; %s), "
            "%d transaction(s), latency p99 %.0f ms, lag %d",
            *(self.flow.name, what, records, size / 2**20, moved, partitions, seconds, rate, phases),
            *(transactions, p99, lag),
        )


def moved_or_behind(payloads: list[dict[str, Any]], ends: dict[tuple[str, int], int]) -> list[dict[str, Any]]:
    """A lease's payloads, each row's ``planned_end`` its partition's end on the source (``ends``;
    one not in it, deleted or not answered for: where the copy stands); the partitions that copied
    nothing, lost nothing and are caught up left out."""
    out = []
    for payload in payloads:
        row = payload["row"]
        row["planned_end"] = ends.get((row["topic"], row["partition"]), row["next_offset"])
        if row["records"] or payload["losses"] or row["planned_end"] > row["next_offset"]:
            out.append(payload)
    return out


def _partition_in(keys: list[tuple[str, int]]) -> Any:
    """An Arrow filter: the row's (topic, partition) is one of ``keys``."""
    import pyarrow.compute as pc

    where = None
    for topic, partition in keys:
        term = (pc.field("topic") == topic) & (pc.field("partition") == partition)
        where = term if where is None else where | term
    return where
