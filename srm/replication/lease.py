"""Continuous mode on the driver: one micro-batch is one lease (see :mod:`.resident`).

A lease's Spark job runs one task per slot for ``task.lease.seconds``; the copiers behind those
tasks commit whenever they catch up (at the latest every ``transaction.interval.ms``) and carry on
into the next lease. While the job runs, the driver watches what would change the plan: new or
removed partitions (topics created, grown or deleted; srm-control's lists edited) and an edited
YAML. It then ends the lease early through the ownership record, so the next plan takes the change
within seconds. A stop request ends the lease the same way, with the copiers committing and
stopping. A lease after one in which nothing was copied lasts ``task.lease.idle.seconds``, and ends
at most ``task.lease.seconds`` after records are copied again (:mod:`.activity`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent import futures
from dataclasses import replace
from pathlib import Path
from typing import Any

from srm.config.model import Flow, SrmConfig
from srm.errors import ClusterUnreachableError, LastingFaultError, SrmError
from srm.kafka import clients
from srm.kafka.control_lists import ControlReader
from srm.kafka.topics import partition_counts
from srm.replication.accounting import BatchLine, Phases
from srm.replication.activity import CopyActivity
from srm.replication.batch import ACCOUNTING_CLOSE_S, BatchRunner
from srm.replication.job import OPEN_END, CopyRange, Lease, split_faults
from srm.replication.outage import Outage
from srm.replication.resident import run_lease
from srm.replication.selector import TopicSelector

log = logging.getLogger("srm.replicate")
WATCH_EVERY_S = 1.0  # how often the driver looks for changes while a lease runs
SLOW_WATCH_S = 3.0  # a look for changes (or the end of a lease) this long is logged, with its steps
# The first lease of a run is at most this long: its metrics rows are written seconds after the
# start instead of task.lease.seconds later, and the first turnover of a lease, which costs the
# driver's JVM several times what a later one does (the code paths of a task's end compiled for
# the first time), falls into the start-up, not into copying at full speed (bench/REPORT.md, "Latency").
FIRST_LEASE_S = 5
UNREACHABLE_RETRY_S = 5.0  # between attempts to start a lease while a cluster does not answer
# A lease whose job runs this long past its end (its copiers hand over within a second or two)
# is probed: does a cluster not answer? Then again every OVERRUN_PROBE_EVERY_S while it runs on.
OVERRUN_S = 30.0
OVERRUN_PROBE_EVERY_S = 60.0
PROBE_TIMEOUT_S = 10.0


def slow_watch(what: str, doing: str, seconds: dict[str, float]) -> str | None:
    """The line saying that a step of watching a lease (its steps' ``seconds``) took long enough
    to delay a change of plan, or None."""
    took = sum(seconds.values())
    if took < SLOW_WATCH_S:
        return None
    steps = ", ".join(f"{step} {s:.1f} s" for step, s in seconds.items())
    return f"{what}: {doing} took {took:.1f} s ({steps}): a change of plan applies that much later"


class PlanWatcher:
    """Would the next plan differ from the running lease's? (source partitions, lists, the YAML)"""

    def __init__(self, flow: Flow, config: SrmConfig, source_admin: Any) -> None:
        self.flow = flow
        self.source_admin = source_admin
        self.path = Path(config.file)
        self.mtime = self._mtime()
        self.control = ControlReader(config.cluster(flow.target))
        self.control.poll()
        self.activity = CopyActivity(config.cluster(flow.target), flow)
        self.selector = self._selector()
        self.expected: dict[str, int] = {}  # topic -> partitions of the running lease
        self.grown: dict[str, int] = {}  # topic -> partitions, of those with new partitions at the last change()
        # The source's last listing, the selector that judged it and what it admitted: a listing
        # like the last one (the common case, every second) is not judged again topic by topic.
        self._listed: tuple[dict[str, int], TopicSelector, dict[str, int]] = ({}, self.selector, {})

    def expect(self, flow: Flow, partitions: set[tuple[str, int]]) -> None:
        """The running lease's plan; the lists read up to now, as the planner read them for it."""
        self.flow = flow
        with contextlib.suppress(ClusterUnreachableError):  # then change() reads them once it answers
            self.control.poll(recheck=True)
        self.selector = self._selector()
        self.expected = dict(Counter(t for t, _ in partitions))
        self.mtime = self._mtime()

    def change(self) -> str | None:
        """Why the lease should end now, or None."""
        if self._mtime() != self.mtime:
            return f"{self.path} changed"
        if self.control.poll():
            self.selector = self._selector()
        counts = partition_counts(self.source_admin, include_internal=True)
        listed, selector, replicated = self._listed
        if counts != listed or selector is not self.selector:
            replicated = {t: n for t, n in counts.items() if self.selector.replicates(t)}
            self._listed = (counts, self.selector, replicated)
        if replicated != self.expected:
            self.grown = {t: n for t, n in replicated.items() if n > self.expected.get(t, 0)}
            now = {(t, p) for t, n in replicated.items() for p in range(n)}
            before = {(t, p) for t, n in self.expected.items() for p in range(n)}
            new, gone = sorted(now - before), sorted(before - now)
            shown = ", ".join(f"{t}[{p}]" for t, p in (new or gone)[:3]) + (", ..." if len(new or gone) > 3 else "")
            return f"{len(new)} new and {len(gone)} removed partition(s): {shown}"
        return None

    def close(self) -> None:
        self.control.close()
        self.activity.close()

    def _selector(self) -> TopicSelector:
        lists = self.control.lists(self.flow, "topics")
        return TopicSelector(self.flow, lists.allow, lists.deny)

    def _mtime(self) -> float:
        return self.path.stat().st_mtime if self.path.exists() else 0.0


class LeaseRunner(BatchRunner):
    mode = "continuous"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As :class:`BatchRunner`."""
        super().__init__(*args, **kwargs)
        self.watcher = PlanWatcher(self.flow, self.config, self.source_admin)
        self.stopping = threading.Event()
        self.idle = threading.Event()
        self.idle.set()
        self._jobs = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="srm-lease")
        self._prepare = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="srm-prepare")
        self._preparing: futures.Future[None] | None = None
        self.leases = 0  # started by this run
        self.quiet = False  # the last lease copied nothing (heartbeats aside) and ran its course: the next is idle
        # Called as a lease ends early for a change of plan: the planner takes the next plan's
        # snapshot while the copiers commit (Planner.snapshot_ahead, set by launch.start_replication).
        self.plan_ahead: Callable[[], None] = lambda: None

    def request_stop(self) -> None:
        """End the running lease (its copiers commit and stop) and start no other."""
        self.stopping.set()

    def __call__(self, ranges: list[CopyRange], batch_id: int, phases: Phases | None = None) -> None:
        if self.stopping.is_set():
            return
        self.idle.clear()
        try:
            self._lease(ranges, batch_id, phases or Phases())
        finally:
            self.idle.set()

    def _lease(self, ranges: list[CopyRange], batch_id: int, phases: Phases) -> None:
        phases.lap("plan")
        self._prepared()
        self._reload()
        if self._refresh_clients():
            self._when_reachable(self._new_watcher)
        self._when_reachable(lambda: self._ensure_topics(ranges))
        phases.lap("topics")
        seconds = self._seconds()
        self.leases += 1
        settings = self.flow.settings
        lease = Lease(batch_id, seconds, settings.transaction_interval_ms, settings.transaction_linger_ms)
        jobs = self.jobs([replace(r, end=OPEN_END) for r in ranges], lease)
        self.watcher.expect(self.flow, {r.key for r in ranges})
        self.workers_started()
        started = time.monotonic()
        running = self._jobs.submit(lambda: self._copy_rdd(batch_id, jobs, run_lease).collect())
        ended = self._watch(batch_id, running, seconds)
        payloads, fault = split_faults(running.result())
        self.quiet = fault is None and not ended and not self._copied(payloads)
        self.assignment.observe((p["row"] for p in payloads), time.monotonic() - started)
        if fault is None:
            self.states.copying()
        phases.lap("lease")
        self._after(BatchLine(f"lease {batch_id}", batch_id, len(ranges), phases), payloads, lease=True)
        if fault is not None:
            raise LastingFaultError(fault)

    def _when_reachable(self, step: Callable[[], None]) -> None:
        """``step()``, again and again while a cluster does not answer: an outage pauses the flow
        (the copiers park after their grace) for up to the flow's errors.retry.timeout, then ends it
        (LastingFaultError); with -1 for good, saying every minute what it waits for. A stop
        request ends the wait."""
        outage = Outage()
        while True:
            try:
                step()
                return
            except ClusterUnreachableError as exc:
                if self.stopping.is_set():
                    raise
                self.states.waiting(exc.cluster, f"{exc}; the next lease waits for it")
                outage.failed(
                    str(exc), self.flow.settings.errors_retry_timeout_ms, lambda: f"flow {self.flow.name}: next lease"
                )
                time.sleep(UNREACHABLE_RETRY_S)

    def _copied(self, payloads: list[dict[str, Any]]) -> bool:
        """Did the lease copy records of a topic other than a heartbeats topic (see :mod:`.activity`)?"""
        is_heartbeats = self.flow.policy.is_heartbeats_topic
        return any(p["row"]["records"] and not is_heartbeats(p["row"]["topic"]) for p in payloads)

    def _seconds(self) -> float:
        """How long the next lease lasts: the first of a run at most FIRST_LEASE_S, one after an
        idle lease task.lease.idle.seconds (when longer), else task.lease.seconds."""
        s = self.flow.settings
        if not self.leases:
            return min(FIRST_LEASE_S, s.task_lease_seconds)
        return s.longest_lease_seconds if self.quiet else s.task_lease_seconds

    def _watch(self, batch_id: int, running: futures.Future[Any], seconds: float) -> bool:
        """Until the lease's job returns: end the lease early when the plan would change, or when
        an idle lease finds its flow copying again (task.lease.seconds after); when it overruns,
        find out whether it waits for a cluster that does not answer. True if it ended early."""
        activity = self.watcher.activity
        if seconds > self.flow.settings.task_lease_seconds:
            activity.listen()
        try:
            return self._watch_lease(batch_id, running, seconds, activity)
        finally:
            activity.stop()

    def _watch_lease(self, batch_id: int, running: futures.Future[Any], seconds: float, activity: CopyActivity) -> bool:
        ended = False
        overrun = time.monotonic() + seconds + OVERRUN_S
        copying_by: float | None = None  # an idle lease that finds records copied ends by then
        while not running.done():
            futures.wait([running], timeout=WATCH_EVERY_S)
            if running.done():
                break
            if time.monotonic() > overrun:
                overrun = time.monotonic() + OVERRUN_PROBE_EVERY_S
                self._probe()
            began = time.monotonic()
            self.owner.check()  # another run took the flow over: its tasks fail the job too
            checked = time.monotonic()
            if ended:
                continue
            if copying_by is None and activity.seen():
                copying_by = time.monotonic() + self.flow.settings.task_lease_seconds
            reason = "stop requested" if self.stopping.is_set() else self._change()
            self._slow(batch_id, "looking for a change", ownership=checked - began, plan=time.monotonic() - checked)
            if reason is None and copying_by is not None and time.monotonic() >= copying_by:
                reason = "records copied again"
            if reason is None:
                continue
            log.info("flow %s: lease %d ends early: %s", self.flow.name, batch_id, reason)
            began = time.monotonic()
            if self.stopping.is_set():
                self.owner.stop()
            else:
                self.owner.end_lease(batch_id)
                self.plan_ahead()
                self._preparing = self._prepare.submit(self._prepare_topics)
            self._slow(batch_id, "ending the lease", record=time.monotonic() - began)
            ended = True
        return ended

    def _slow(self, batch_id: int, doing: str, **seconds: float) -> None:
        line = slow_watch(f"flow {self.flow.name}: lease {batch_id}", doing, seconds)
        if line is not None:
            log.warning("%s", line)

    def _prepared(self) -> None:
        """Until the remote topics being made while the last lease ended are made (or failed)."""
        preparing, self._preparing = self._preparing, None
        if preparing is not None:
            preparing.result()

    def _prepare_topics(self) -> None:
        """While the lease ends (its copiers commit and stop), in a thread of its own, the remote
        topics of the partitions that ended it are made ready, so the next lease does not wait for
        their creation. The run loop's thread leaves the remote topics alone meanwhile: the next
        lease waits for this first (:meth:`_prepared`)."""
        grown, self.watcher.grown = self.watcher.grown, {}
        if not grown:
            return
        try:
            self.remote_topics.prepare(grown)
        except SrmError as exc:  # the next lease's ensure tries again and says what is wrong
            log.info("flow %s: the new partitions' remote topics wait for the next lease: %s", self.flow.name, exc)

    def _new_watcher(self) -> None:
        watcher = PlanWatcher(self.flow, self.config, self.source_admin)
        self.watcher.close()
        self.watcher = watcher

    def _probe(self) -> None:
        """A lease that overran: its copiers retry while a cluster does not answer (up to the flow's
        errors.retry.timeout); say which, for the status and the log."""
        for cluster in (self.target, self.source):
            try:
                clients.check_reachable(cluster, PROBE_TIMEOUT_S)
            except ClusterUnreachableError as exc:
                self.states.waiting(cluster.alias, f"{exc}; the copiers retry")
                return

    def _change(self) -> str | None:
        try:
            return self.watcher.change()
        except ClusterUnreachableError as exc:  # copying goes on meanwhile, or waits for the cluster
            log.warning("flow %s: not watching for changes: %s", self.flow.name, exc)
            return None

    def close(self, timeout_s: float = ACCOUNTING_CLOSE_S) -> None:
        began = time.monotonic()
        preparing = self._preparing
        if preparing is not None:
            futures.wait([preparing], timeout=timeout_s)
        self._prepare.shutdown(wait=False)
        super().close(max(0.0, timeout_s - (time.monotonic() - began)))  # one bound for both waits
        self.watcher.close()
