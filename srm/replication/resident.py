"""Continuous mode: a copier that keeps copying across the leases of its slot.

A lease is one Spark task per slot holding the slot's partitions for ``task.lease.seconds``. The
copying itself runs in a thread of the task's Python worker (:class:`ResidentCopier`) that
outlives the task: the next lease's task of the same slot lands in the same worker (the driver
pins each slot to a worker of its own, see :mod:`srm.replication.batch`), hands the copier the new
plan, and the copier goes on without a pause, its consumer still fetching and its transactional
producer still initialised. A record therefore waits only for its transaction, never for Spark's
scheduling: the copier commits as soon as it has caught up (its consumer holds nothing more), no
sooner than ``transaction.linger.ms`` after its previous commit began (0 by default), and at the
latest ``transaction.interval.ms`` after the transaction's first record. What arrives
while a commit waits for its records' acknowledgements goes into the next transaction, on the
slot's other producer (srm.replication.producers).

A task ends at its lease's end, when the ownership record says so (a higher lease number: new
topics, an edited list or YAML; ``stopped``; another epoch: the flow was taken over), or when the
copier needs the driver (data loss to report, a partition to plan again, an error). It returns
what the copier did during the lease, committed, as one payload per partition.

Without a renewal the copier commits and stops ``GRACE_S`` after its lease ended, so a copier
never outlives its driver for long; a stopped copier is started again by the next task.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from srm.errors import InvariantError, LastingFaultError, SrmError
from srm.kafka import clients
from srm.replication.copier import CopyLoop, commit_or_rewind, worker_logging
from srm.replication.heap import fix_mmap_threshold, trim_heap
from srm.replication.job import CopyJob, Lease, PartitionResult, fault_payload
from srm.replication.kafka_errors import ProducerFencedError
from srm.replication.ownership import STOPPED, OwnerTail, latest_ownership, taken_over

log = logging.getLogger(__name__)

# How long copying goes on after a lease ended without the next one: covers the driver's work
# between two leases (accounting, planning, starting the job: about a second here).
GRACE_S = 30.0
IDLE_WAIT_S = 0.05  # longest wait for a record when no transaction is open
OWNERS_POLL_S = 0.1
SETTLE_POLL_S = 0.5  # how often a copier without an open transaction looks for quiet partitions
# The same once its reader is quiet (no record for QUIET_AFTER_S): what falls due after the copy
# stops (plain progress, a last status) fell due within seconds of it, and a look at 1,000
# partitions costs a millisecond or two.
QUIET_SETTLE_POLL_S = 5.0
# The hand-over at a lease's end waits for the copier's commit (milliseconds; a transaction's worth
# at most, bounded by the writer's timeouts) and looks every TAKE_POLL_S whether the copier is gone.
TAKE_TIMEOUT_S = 300.0
TAKE_POLL_S = 0.05


@dataclass
class Cadence:
    """When a continuous copier commits: once it has caught up (a read found nothing more), no sooner
    than ``linger_s`` after its previous commit began, at the latest when the writer says the open
    transaction is due (``interval_s`` after its first record, or a full chunk).

    Each commit ends an offset run on every partition it touched (a row of the sync history) and
    writes a commit marker into each: ``linger_s`` bounds both to one per partition per ``linger_s``,
    for up to ``linger_s`` more latency."""

    interval_s: float
    linger_s: float = 0.0
    began: float = float("-inf")  # when the previous commit began (time.monotonic)

    @classmethod
    def of(cls, lease: Lease) -> Cadence:
        return cls(lease.transaction_interval_ms / 1000, lease.transaction_linger_ms / 1000)

    def renewed(self, lease: Lease) -> Cadence:
        return replace(Cadence.of(lease), began=self.began)

    def lingering_s(self, now: float) -> float:
        """How long a copier that has caught up still waits before it commits."""
        return max(0.0, self.began + self.linger_s - now)

    def due(self, due_in: float | None, *, caught_up: bool, now: float) -> bool:
        """``due_in``: the writer's seconds until the open transaction is due, None if none is open."""
        if due_in is None:
            return False
        return due_in <= 0 or (caught_up and self.lingering_s(now) <= 0)


class ResidentCopier(threading.Thread):
    def __init__(self, job: CopyJob, digests: tuple[str, str] = ("", "")) -> None:
        super().__init__(name=f"srm-copier-{job.transactional_id}", daemon=True)
        self.job = job
        self.digests = digests  # of the source's and the target's client settings it started with
        self.carried: list[PartitionResult] = []  # the results of the copier it replaced, not taken yet
        self.lease: Lease = job.lease or Lease(0, 0, 100)
        self.cadence = Cadence.of(self.lease)
        self.loop: CopyLoop | None = None
        self._lock = threading.Lock()
        self._renewal: CopyJob | None = None
        self._take: list[list[PartitionResult]] = []
        self._taken = threading.Event()
        self._take_asked = threading.Event()
        self.lease_over = threading.Event()  # the task of the current lease should return now
        self.error: BaseException | None = None
        self.final: list[PartitionResult] = []
        self.deadline = time.monotonic() + self.lease.seconds + GRACE_S
        self._tail: OwnerTail | None = None
        self._next_owners_poll = 0.0
        self._next_settle_poll = 0.0

    # --- the task's side ----------------------------------------------------------------------
    def renew(self, job: CopyJob) -> None:
        """The next lease: new ranges and settings, applied between two transactions."""
        with self._lock:
            self._renewal = job
            self.lease_over.clear()
            self.deadline = time.monotonic() + (job.lease.seconds if job.lease else 0) + GRACE_S

    def take(self) -> list[PartitionResult]:
        """Commit, then the lease's results (and fresh counters for the next lease). A copier that
        ends meanwhile (an error, its deadline) is noticed within TAKE_POLL_S: its final results."""
        self._taken.clear()
        self._take_asked.set()
        deadline = time.monotonic() + TAKE_TIMEOUT_S
        while not self._taken.wait(TAKE_POLL_S) and self.is_alive():
            if time.monotonic() > deadline:
                if self._sitting_out_an_outage():  # it ends the outage or fails at its bound itself
                    deadline = time.monotonic() + TAKE_POLL_S
                    continue
                raise SrmError(
                    f"copier {self.name} did not commit within {TAKE_TIMEOUT_S:.0f} s at the end of its lease"
                )
        with self._lock:
            taken = self._take.pop() if self._take else self._final_once()
            carried, self.carried = self.carried, []
        return [*carried, *taken]

    def hand_final(self) -> list[PartitionResult]:
        """A copier that ended without an error: what it committed since the last take, once."""
        with self._lock:
            return self._final_once() if self.error is None else []

    def _final_once(self) -> list[PartitionResult]:
        final, self.final = self.final, []
        return final

    def _sitting_out_an_outage(self) -> bool:
        """Is the copier retrying a fault within the flow's errors.retry.timeout (or for good)?"""
        loop = self.loop
        if loop is None or not loop.writer.outage.ongoing:
            return False
        left = loop.writer.outage.remaining(self.job.flow.settings.errors_retry_timeout_ms)
        return left is None or left > 0

    # --- the copier's thread ------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.loop = CopyLoop(self.job)
            self.loop.add(self.job.ranges)
            self._commit()  # new partitions' starting points are on the target at once
            self._tail = OwnerTail(self.loop.owners_reader(), self.job.flow, self.job.owners_offset)
            self._copy()
        except ProducerFencedError as exc:
            self.error = self._fenced(exc)
        except BaseException as exc:
            self.error = exc
        finally:
            self._close()

    def _copy(self) -> None:
        if self.loop is None:
            raise InvariantError(f"copier {self.name}: its copy loop is used before it was built")
        while True:
            if self._renewal is not None:
                self._apply_renewal()
                self.cadence = self.cadence.renewed(self.lease)
            if self._take_asked.is_set():
                self._hand_over()
            if self._owner_says_stop() or time.monotonic() > self.deadline:
                self._commit(settle=list(self.loop.states))  # the next copier reads no history
                return
            interval = self.cadence.interval_s
            open_transaction = self.loop.writer.due_in(interval) is not None
            if not open_transaction and self._settle_due():
                self._commit()
            wait = min(self.cadence.lingering_s(time.monotonic()), IDLE_WAIT_S) if open_transaction else IDLE_WAIT_S
            copied = self.loop.step(wait)
            caught_up = open_transaction and not copied
            if self.cadence.due(self.loop.writer.due_in(interval), caught_up=caught_up, now=time.monotonic()):
                self._commit()  # caught up (the consumer holds nothing more) or the interval is over
            if self.loop.blocked or self.loop.replan:
                self.lease_over.set()  # the driver reports the loss or plans the partition again

    def _commit(self, *, settle: Iterable[Any] = ()) -> bool:
        """Commit (srm.replication.copier.commit_or_rewind), counted by the cadence."""
        if self.loop is None:
            raise InvariantError(f"copier {self.name}: its copy loop is used before it was built")
        self.cadence.began = time.monotonic()
        return commit_or_rewind(self.loop, settle=settle)

    def _settle_due(self) -> bool:
        """Time for plain progress records of quiet partitions (srm.replication.progress)?"""
        if self.loop is None:
            raise InvariantError(f"copier {self.name}: its copy loop is used before it was built")
        now = time.monotonic()
        if now < self._next_settle_poll:
            return False
        self._next_settle_poll = now + (QUIET_SETTLE_POLL_S if self.loop.reader.quiet else SETTLE_POLL_S)
        return self.loop.writer.settle_due(list(self.loop.states.values()))

    def _hand_over(self) -> None:
        if self.loop is None:
            raise InvariantError(f"copier {self.name}: its copy loop is used before it was built")
        while not self._commit():
            self.loop.step(IDLE_WAIT_S)
        results = self.loop.results()
        fresh_started = int(time.time() * 1000)
        for state in self.loop.states.values():
            old = state.result
            state.result = PartitionResult(
                old.topic, old.partition, old.target_topic, old.planned_end, started_ms=fresh_started
            )
            state.saved = (0, 0)
        with self._lock:
            self._take.append(results)
        self._take_asked.clear()
        self._taken.set()
        # What a burst held (an outage's records in flight, a catch-up's large transactions) was
        # freed by now, though glibc keeps the pages: give them back once a lease (microseconds;
        # the outage's own trim at its first commit comes before the catch-up's transactions).
        trim_heap()

    def _apply_renewal(self) -> None:
        if self.loop is None:
            raise InvariantError(f"copier {self.name}: its copy loop is used before it was built")
        with self._lock:
            job, self._renewal = self._renewal, None
        if job is None:
            return
        planned = {r.key: r for r in job.ranges}
        current = self.loop.states
        changed = [
            k
            for k, s in current.items()
            if k not in planned or planned[k].topic_id != s.range.topic_id or k in self.loop.replan
        ]
        # What is removed or replaced below is committed first, its progress plain: whoever
        # copies it next, maybe much later, need not read the history.
        self._commit(settle=changed)
        self.loop.remove(changed)
        self.loop.job = self.loop.writer.job = replace(self.loop.job, ranges=job.ranges, lease=job.lease)
        self.loop.add(r for k, r in planned.items() if k not in self.loop.states)
        self._commit()
        self.job = job
        self.lease = job.lease or self.lease

    def _owner_says_stop(self) -> bool:
        """Poll the ownership records: a higher lease ends the task, another epoch ends the copier."""
        now = time.monotonic()
        if self._tail is None or now < self._next_owners_poll:
            return False
        self._next_owners_poll = now + OWNERS_POLL_S
        latest = self._tail.poll()
        if latest is None:
            return False
        if latest.epoch != self.job.epoch:
            if latest.run != self.job.owners_run:
                raise taken_over(self.job.flow, self.job.epoch, latest)
            log.info("%s: epoch %d of this run begins; this copier stops", self.name, latest.epoch)
            return True
        if latest.lease > self.lease.number and not self.lease_over.is_set():
            self.lease_over.set()
            if self.loop is not None:
                self.loop.reader.learn_ahead()  # the next lease may bring new topics
        return latest.state == STOPPED

    def _fenced(self, exc: ProducerFencedError) -> BaseException:
        """Fenced: by a newer owner (say so), or by a newer copier of this very slot (quietly)."""
        if self.loop is None:
            raise InvariantError(f"copier {self.name}: its copy loop is used before it was built")
        latest, _ = latest_ownership(self.loop.writer.target_consumer, self.job.flow, self.job.owners_offset)
        if latest is not None and latest.epoch != self.job.epoch and latest.run != self.job.owners_run:
            return taken_over(self.job.flow, self.job.epoch, latest)
        return exc

    def _close(self) -> None:
        try:
            if self.loop is not None:
                try:
                    self.final = self.loop.results()
                finally:
                    if self._tail is not None:
                        self._tail.close()
                    self.loop.close()
        finally:  # the task waiting in take() returns whatever happened above
            self.lease_over.set()
            self._taken.set()


_COPIERS: dict[tuple[str, int], ResidentCopier] = {}
_REGISTRY_LOCK = threading.Lock()


def attach(job: CopyJob) -> ResidentCopier:
    """The running copier of the job's slot, renewed; a new one if there is none of this epoch, or
    if the client settings of a cluster resolve differently now (the YAML, a ``${env:}`` or
    ``${file:}`` secret, an Airflow connection changed): the new copier's clients are built afresh."""
    key = (job.flow.name, job.slot)
    digests = (clients.settings_digest(job.source), clients.settings_digest(job.target))
    with _REGISTRY_LOCK:
        copier = _COPIERS.get(key)
        running = copier is not None and copier.is_alive()
        if copier is not None and running and _same_writer(copier.job, job) and copier.error is None:
            if copier.digests == digests:
                copier.renew(job)
                return copier
            changed = [
                c.alias
                for c, old, new in zip((job.source, job.target), copier.digests, digests, strict=True)
                if old != new
            ]
            log.info(
                "slot %d of flow %s: the client settings of %s changed; the copier starts again with new clients",
                *(job.slot, job.flow.name, " and ".join(changed)),
            )
        carried: list[PartitionResult] = []
        if copier is not None and running:  # another epoch, writer or settings: it commits and stops
            copier.deadline = 0.0
            copier.join(TAKE_TIMEOUT_S)
        if copier is not None and not copier.is_alive() and copier.job.owners_run == job.owners_run:
            # What it committed since the last take (also when it stopped by itself, seeing this
            # run's new epoch): reported by the new copier's first take, once.
            carried = copier.hand_final()
        freeze_heap()
        copier = ResidentCopier(job, digests)
        copier.carried = carried
        _COPIERS[key] = copier
        log.info(
            "slot %d of flow %s: copier started (epoch %d, %d partition(s))",
            *(job.slot, job.flow.name, job.epoch, len(job.ranges)),
        )
        copier.start()
        return copier


def freeze_heap() -> None:
    """Keep the cycle collector from stopping the copier: a full collection walks every object of
    the Python worker (pyspark's and ours, ~60,000) holding the GIL, and each lease's task starts
    one with its own allocations: 47-97 ms at every lease, measured here, a stop every record of
    that moment waits out. Collected once as a copier starts, what survives leaves the collector's
    view (gc.freeze): later full collections walk only what was made since (1-4 ms measured).

    What an earlier freeze kept is put back first (gc.unfreeze), so the copier this one replaces,
    its clients and its buffers, which were alive at that freeze, are collected now rather than kept
    for the life of the worker: the heap holds one copier's objects, however often copiers start."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


def _same_writer(running: CopyJob, job: CopyJob) -> bool:
    """Can the running copier take ``job`` over: same epoch, and the settings its writer, its loss
    handling and its clients were built with (the linger: srm.replication.producers.producer_settings,
    srm.replication.source_reader.consumer_settings; the rest is read from the job as it comes)."""
    a, b = running.flow.settings, job.flow.settings
    built = (a.exactly_once, a.on_data_loss, running.linger_ms)
    return running.epoch == job.epoch and built == (b.exactly_once, b.on_data_loss, job.linger_ms)


def run_lease(job: CopyJob) -> list[dict[str, Any]]:
    """Entry point of a continuous-mode Spark task: one lease of one slot."""
    if job.lease is None:
        raise InvariantError(f"slot {job.slot} of flow {job.flow.name}: a lease task got a job without a lease")
    worker_logging()
    fix_mmap_threshold()
    copier = attach(job)
    ends = time.monotonic() + job.lease.seconds
    while not copier.lease_over.is_set() and time.monotonic() < ends:
        copier.lease_over.wait(min(1.0, max(0.0, ends - time.monotonic())))
    results = copier.take()
    payloads = [result.payload() for result in results]
    if isinstance(copier.error, LastingFaultError):
        return [*payloads, fault_payload(str(copier.error))]
    if copier.error is not None:
        raise copier.error
    return payloads
