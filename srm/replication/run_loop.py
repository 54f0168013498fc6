"""A flow's stream of micro-batches, planned and run by a thread of the driver.

Each step plans (:class:`~srm.replication.planner.Planner`, in this process), records the plan
(:class:`~srm.replication.plan_log.PlanLog`), runs it (a :class:`~srm.replication.batch.BatchRunner`
copies a batch, a :class:`~srm.replication.lease.LeaseRunner` runs a lease) and marks it done.
``available-now`` takes the source's ends once when it starts and stops when it reached them;
``continuous`` starts the next lease as soon as the previous one returns.

Spark's structured streaming did this before through a Python data source. That costs, for
every job, a Python process that plans, one that turns a plan into rows and three that look up
and create the source: about 0.5 GiB that a single MirrorMaker 2 JVM does not spend, and a
round trip between them at every lease. The copy itself still runs as Spark jobs.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from srm.errors import InvariantError, SrmError
from srm.replication import offsets
from srm.replication.accounting import Phases
from srm.replication.heap import trim_heap
from srm.replication.outage import Outage
from srm.replication.plan_log import PlanLog
from srm.replication.planner import Planner

log = logging.getLogger("srm.replicate")
UNANSWERED_WAIT_S = 1.0  # continuous: before planning again while the source does not answer


class RunLoop(threading.Thread):
    def __init__(self, spark: Any, planner: Planner, runner: Any, plan_log: PlanLog, mode: str) -> None:
        super().__init__(name=f"srm-run {runner.flow.name}", daemon=True)
        self.spark, self.planner, self.runner, self.plans, self.mode = spark, planner, runner, plan_log, mode
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    @property
    def is_active(self) -> bool:
        return self.is_alive()

    def run(self) -> None:
        try:
            start, batch = self._resume()
            if self.mode == "available-now":
                self._available_now(start, batch)
            else:
                self._continuous(start, batch)
        except BaseException as exc:  # handed to the thread that waits for the run
            if not isinstance(exc, SrmError) or isinstance(
                exc, InvariantError
            ):  # a bug, or Spark failed: its traceback
                log.error(
                    "flow %s: the replication stopped on an unexpected error", self.runner.flow.name, exc_info=exc
                )
            self.error = exc
        finally:
            self.planner.close()

    def stop(self, timeout_s: float = 60.0) -> None:
        """No further batch; a running copy job is cancelled (its transactions abort)."""
        self.stopping.set()
        self.spark.sparkContext.cancelJobGroup(self.runner.job_group)
        if self is not threading.current_thread() and self.ident is not None:
            self.join(timeout_s)

    def _resume(self) -> tuple[offsets.Offsets | None, int]:
        """Where this run goes on: after the last batch (a batch left unfinished runs again
        first), or ``None`` for a new plan log."""
        last = self.plans.last()
        if last is None:
            return None, 0
        start, end = last.start, last.end
        dropped = self.planner.out_of_flow(start, end)
        if dropped:  # the configuration outranks the plan: what left the flow is not copied again
            start, end = offsets.without(start, dropped), offsets.without(end, dropped)
        if not last.done:
            name = self.runner.flow.name
            if dropped:
                log.warning(
                    "flow %s: batch %d did not finish; running it again without %s, no longer in the flow (their "
                    "progress on %s is kept: added back, they resume from it)",
                    *(name, last.batch, ", ".join(sorted(dropped)), self.runner.flow.target),
                )
            else:
                log.info("flow %s: batch %d did not finish; running it again", name, last.batch)
            self._run(last.batch, start, end, Phases())
        return end, last.batch + 1

    def _available_now(self, start: offsets.Offsets | None, batch: int) -> None:
        # A new plan log's first batch runs even with nothing to copy: it commits the positions of
        # the partitions seen for the first time (``start: latest``).
        must_run = start is None
        begin = start if start is not None else self.planner.initial()
        frozen = self.planner.frozen()
        while not self.stopping.is_set():
            phases = Phases()
            end = self.planner.frozen_after(begin, frozen)
            if end is begin and not must_run:
                return
            self.plans.planned(batch, begin, end)
            self._run(batch, begin, end, phases)
            begin, batch, must_run = end, batch + 1, False

    def _continuous(self, start: offsets.Offsets | None, batch: int) -> None:
        outage = Outage()  # the source not answering, bounded by the flow's errors.retry.timeout
        while not self.stopping.is_set():
            phases = Phases()
            begin = start if start is not None else self.planner.initial()
            end = self.planner.latest(begin)
            if end is begin:  # a cluster does not answer: no new lease yet
                flow = self.runner.flow
                reason = f"{self.planner.unanswered}; no new lease"
                self.runner.states.waiting(self.planner.unanswered_cluster, reason)
                where = f"flow {flow.name}: planning the next lease"
                outage.failed(reason, flow.settings.errors_retry_timeout_ms, lambda: where)  # noqa: B023 - called now
                start = begin
                self.stopping.wait(UNANSWERED_WAIT_S)
                continue
            outage.recovered()
            self.plans.planned(batch, begin, end)
            self._run(batch, begin, end, phases)
            start, batch = end, batch + 1

    def _run(self, batch: int, start: offsets.Offsets, end: offsets.Offsets, phases: Phases) -> None:
        self.runner(self.planner.ranges(start, end), batch, phases)
        if not self.stopping.is_set():  # a stopped batch may have been cut short: run it again
            self.plans.done(batch)
        # Each lease's accounting allocates and frees (admin answers, history and progress records):
        # glibc keeps the freed pages, and the driver's RSS wandered 200-255 MiB in bench.soak.
        trim_heap()


def run_error(exc: BaseException) -> SrmError:
    """What a failed run reports: the project's own error as raised, else the error it carried."""
    from srm.spark.failures import user_error

    return exc if isinstance(exc, SrmError) else user_error(exc)
