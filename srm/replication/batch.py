"""One micro-batch on the driver: topics ready, copy job, accounting, one log line.

1. Remote topics for every planned range exist with the right partitions (created or grown).
2. The ranges are grouped by transactional slot, placed by their load (:mod:`.assignment`: an
   available-now batch by the records it plans, continuous mode by observed bytes/s, a partition
   keeping its slot within an epoch of the flow's ownership) and copied by a Spark job with one
   task per slot.
3. Syncs, metrics, losses and history are written in the background (:mod:`.accounting`).
4. One readable line is logged. Losses under ``on_data_loss: fail`` stop the flow here.

:class:`BatchRunner` runs available-now batches; :class:`srm.replication.lease.LeaseRunner`
runs continuous mode's leases on the same parts.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

from srm.config import load_config
from srm.config.model import Flow, SrmConfig
from srm.errors import DataLossError, InvariantError, LastingFaultError, ReplicationError, SrmError
from srm.kafka import clients
from srm.kafka.internal_topics import history_topic_name, mm2_offset_syncs_topic, progress_topic_name
from srm.kafka.topics import partition_counts
from srm.replication.accounting import Accounting, BatchLine, Phases
from srm.replication.assignment import RECORD_COST_BYTES, Assignment, Key, balanced
from srm.replication.drain import run_slot
from srm.replication.flow_state import FlowStates
from srm.replication.job import CopyJob, CopyRange, Lease, Loss, split_faults
from srm.replication.ownership import FlowOwner, Ownership
from srm.replication.progress import Progress
from srm.replication.remote_topics import RemoteTopics, deleted_error, describe_gone
from srm.replication.slot_daemons import (
    EXECUTORS_WAIT_S,
    SlotDaemons,
    SlotExecutors,
    Warmup,
    on_local_master,
    slot_rdd,
    task_slots,
)
from srm.storage.warehouse import Warehouse

log = logging.getLogger("srm.replicate")
ACCOUNTING_CLOSE_S = 120.0  # at the end of a run: what the accounting may still take


class BatchRunner:
    mode = "available-now"

    def __init__(
        self,
        spark: Any,
        config: SrmConfig,
        flow: Flow,
        query_id: str,
        owner: FlowOwner,
        *,
        warmup: Warmup | None = None,
    ) -> None:
        """``warmup``: the slots' Python workers being started (the first copy job waits for it)."""
        self.spark = spark
        self.warmup = warmup
        # The Spark job group of the copy jobs: cancelling it (the run loop stops) stops a running one.
        self.job_group = f"srm {flow.name} {uuid.uuid4().hex[:8]}"
        self.config = config
        self.flow = flow
        self.owner = owner
        self.source = config.cluster(flow.source)
        self.target = config.cluster(flow.target)
        self.settings_watch = clients.SettingsWatch(self.source, self.target)
        self.source_admin = clients.settled(clients.admin_client(self.source))
        self.target_admin = clients.settled(clients.admin_client(self.target))
        self.remote_topics = RemoteTopics(flow, self.target, self.source_admin, self.target_admin, self._gone)
        self.history_topic = history_topic_name(flow)
        # Warehouse appends are idempotent per (plan log, this run, batch): a batch replayed after a
        # restart describes what the replay did (usually nothing left to copy), never double counts.
        self.accounting = Accounting(
            config, flow, query_id, owner.run, source_admin=self.source_admin, target_admin=self.target_admin
        )
        self._config_mtime = Path(config.file).stat().st_mtime if Path(config.file).exists() else 0.0
        self.states = FlowStates(Warehouse(config.storage.warehouse), flow.name, owner.run)
        self.states.started()
        context = spark.sparkContext
        local = on_local_master(context)  # the executor is this driver's JVM
        self.assignment = Assignment(flow.name)
        self.slot_daemons = SlotDaemons(
            flow.name, int(context._jvm.java.lang.ProcessHandle.current().pid()) if local else None
        )
        if warmup is not None:  # its daemons retire like any other slot's if no batch uses them
            self.slot_daemons.used(range(warmup.slots))
        # where each slot's tasks run on a cluster: where the warm-up started its worker
        self.slot_executors = warmup.executors if warmup is not None else SlotExecutors(context)

    @property
    def ownership(self) -> Ownership:
        if self.owner.current is None:
            raise InvariantError("batch: the flow is claimed before its run loop starts")
        return self.owner.current

    def __call__(self, ranges: list[CopyRange], batch_id: int, phases: Phases | None = None) -> None:
        """``phases``: started when the run loop began to plan this batch."""
        phases = phases or Phases()
        log.debug("flow %s batch %d plan: %s", self.flow.name, batch_id, ranges)
        if not ranges:
            return
        phases.lap("plan")
        self._reload()
        self._refresh_clients()
        self._ensure_topics(ranges)
        phases.lap("topics")
        self.workers_started()
        payloads, fault = split_faults(self._copy(batch_id, self.jobs(ranges), run_slot))
        phases.lap("copy")
        self._after(BatchLine(f"batch {batch_id}", batch_id, len(ranges), phases), payloads)
        if fault is not None:
            raise LastingFaultError(fault)

    def workers_started(self) -> None:
        """Before the first copy job: the slots' Python workers started ahead are idle (the job's
        tasks are handed them, not second workers of their slots)."""
        if self.warmup is not None:
            self.warmup.wait()
            self.warmup = None

    def _ensure_topics(self, ranges: list[CopyRange]) -> None:
        """The remote topics of ``ranges`` are ready; the source's metadata (a request for every
        topic) is asked only when one may not be."""
        wanted: dict[str, int] = {}
        for r in ranges:
            wanted[r.topic] = max(wanted.get(r.topic, 0), r.partition + 1)
        if self.remote_topics.ready(wanted):
            return
        counts = partition_counts(self.source_admin, include_internal=True)
        self.remote_topics.ensure({t: counts.get(t, n) for t, n in wanted.items()})

    def _gone(self, gone: dict[tuple[str, int], Progress]) -> None:
        """Remote topics deleted from the target after the flow copied into them: the flow stops
        (on_data_loss: fail), or they are created again and the copy goes on from the committed
        progress, their old sync history dropped and what was copied before recorded as lost."""
        if self.flow.settings.on_data_loss == "fail":
            self.close()
            raise deleted_error(self.flow, gone)
        log.warning(
            "flow %s: %s deleted from %s after the flow copied into them (on_data_loss: continue): creating them "
            "again and copying on from the committed progress; their sync history is dropped",
            *(self.flow.name, describe_gone(self.flow, gone), self.flow.target),
        )
        self.accounting.forget(gone, lambda topic: self.flow.policy.format_remote_topic(self.flow.source, topic))

    def _after(self, batch: BatchLine, payloads: list[dict[str, Any]], *, lease: bool = False) -> None:
        losses = [Loss(**loss) for p in payloads for loss in p["losses"]]
        self.accounting.submit(batch, payloads, losses, lease=lease)
        if losses and self.flow.settings.on_data_loss == "fail":
            self.close()
            listed = "; ".join(str(loss) for loss in losses)
            raise DataLossError(
                f"flow {self.flow.name} stopped (on_data_loss: fail): {listed}. The target holds everything "
                "before these offsets; set on_data_loss: continue for this flow to skip them and go on"
            )

    def _reload(self) -> bool:
        """Re-read the YAML when it changed; True if the flow's settings changed."""
        path = Path(self.config.file)
        mtime = path.stat().st_mtime if path.exists() else 0.0
        if mtime == self._config_mtime:
            return False
        self._config_mtime = mtime
        try:
            config = load_config(path, strict=True)
            flow = config.flow(self.flow.source, self.flow.target)
        except Exception as exc:
            log.error("configuration %s changed but is invalid; keeping the previous one: %s", path, exc)
            return False
        changed = flow != self.flow
        self.flow, self.config = flow, config
        self.source, self.target = config.cluster(flow.source), config.cluster(flow.target)
        self.remote_topics.flow = flow
        self.accounting.flow = flow
        log.info("flow %s: configuration %s reloaded", flow.name, path)
        return changed

    def _refresh_clients(self) -> bool:
        """At each batch or lease, the driver's clients of a cluster whose client settings resolve
        differently now are built again (the copiers do the same in their workers). True if so."""
        changed = self.settings_watch.changed(self.source, self.target)
        if not changed:
            return False
        name, which = self.flow.name, " and ".join(changed)
        try:
            source_admin = clients.settled(clients.admin_client(self.source))
            target_admin = clients.settled(clients.admin_client(self.target))
            if self.target.alias in changed:
                self.owner.use_target(self.target)  # its new producer first: it may fail
        except SrmError as exc:
            log.warning(
                "flow %s: new clients for %s failed (%s); the current ones stay until the next lease", name, which, exc
            )
            return False
        log.info("flow %s: the client settings of %s changed; its clients were built again", name, which)
        self.source_admin, self.target_admin = source_admin, target_admin
        known = self.remote_topics.known
        self.remote_topics = RemoteTopics(self.flow, self.target, self.source_admin, self.target_admin, self._gone)
        self.remote_topics.known = known
        self.accounting.use_clients(self.source, self.target, self.source_admin, self.target_admin)
        self.settings_watch.accept()
        return True

    def close(self, timeout_s: float = ACCOUNTING_CLOSE_S) -> None:
        if self.warmup is not None:  # the run ends before its first copy job
            self.warmup.cancel()
        self.accounting.close(timeout_s)

    # --- the copy job -------------------------------------------------------------------------
    def jobs(self, ranges: list[CopyRange], lease: Lease | None = None) -> list[CopyJob]:
        own = self.ownership
        if own.tasks != self.flow.settings.tasks_max:  # tasks.max changed: a new epoch first
            own = self.owner.claim(self.flow.settings.tasks_max, self.mode)
        elif lease is not None and (drift := self._drift()) is not None:
            own = self.owner.claim(own.tasks, self.mode, reason=f"partitions placed again by load: {drift}")
        grouped: dict[int, list[CopyRange]] = defaultdict(list)
        placement = self._placement(ranges, own.epoch, own.tasks, continuous=lease is not None)
        for r in ranges:
            grouped[placement[r.key]].append(r)
        mm2 = mm2_offset_syncs_topic(self.flow)
        on_target = self.flow.settings.emit_offset_syncs_enabled and mm2.cluster == self.flow.target
        return [
            CopyJob(
                self.flow,
                self.source,
                self.target,
                slot,
                tuple(grouped.get(slot, ())),
                self.history_topic,
                progress_topic_name(self.flow),
                own.epoch,
                own.run,
                self.owner.offset,
                mm2.name if on_target else None,
                lease,
                own.tasks,
            )
            for slot in range(own.tasks)
            if slot in grouped or lease is not None  # a lease runs every slot, to pick up new partitions
        ]

    def _drift(self) -> str | None:
        return self.assignment.drift(time.monotonic(), self.flow.settings.tasks_rebalance_interval_seconds)

    def _placement(self, ranges: list[CopyRange], epoch: int, slots: int, *, continuous: bool) -> dict[Key, int]:
        """The slot of each range's partition (srm.replication.assignment): in available-now mode by
        the records each plans to copy, in continuous mode kept within the epoch."""
        if continuous:
            return self.assignment.place((r.key for r in ranges), epoch, slots, time.monotonic())
        return balanced({r.key: float(RECORD_COST_BYTES * max(0, r.end - r.start)) for r in ranges}, slots)

    def _copy(self, batch_id: int, jobs: list[CopyJob], task: Any) -> list[dict[str, Any]]:
        return list(self._copy_rdd(batch_id, jobs, task).collect())

    def _copy_rdd(self, batch_id: int, jobs: list[CopyJob], task: Any) -> Any:
        context = self.spark.sparkContext
        slots = len(jobs)
        if self.mode == "continuous" and slots > (running := task_slots(context, slots)):
            waited = "" if on_local_master(context) else f" after {EXECUTORS_WAIT_S:.0f} s for executors"
            raise ReplicationError(
                f"flow {self.flow.name}: tasks.max {slots} needs {slots} Spark tasks at once for its leases, but the "
                f"application runs {running}{waited} (master {context.master}); give it more cores "
                "(e.g. --master local[N], spark.cores.max) or lower tasks.max"
            )
        self.slot_daemons.used(job.slot for job in jobs)
        partitions = sum(len(job.ranges) for job in jobs)
        description = f"flow {self.flow.name} {batch_id}: {partitions} partition(s), {slots} slot(s)"
        context.setJobGroup(self.job_group, description, interruptOnCancel=True)
        where = self.slot_executors.locations(job.slot for job in jobs)
        rdds = [slot_rdd(context, self.flow.name, job.slot, [job], task, location=where.get(job.slot)) for job in jobs]
        return rdds[0] if len(rdds) == 1 else context.union(rdds)
