"""Starting a flow's replication in a Spark application: internal topics, ownership, the plan log,
the runner and the run loop; the run as its caller holds it."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srm.config.model import Flow, SrmConfig
from srm.errors import SrmError
from srm.storage import locations

log = logging.getLogger("srm.replicate")

FAILED_CLOSE_S = 15.0  # ReplicationRun: the accounting's and the stop record's time after a failure


def plan_log_dir(config: SrmConfig, flow: Flow) -> str:
    return locations.join(config.storage.plan_logs, f"{flow.source}_to_{flow.target}")


def start_replication(
    spark: Any,
    config: SrmConfig,
    flow: Flow,
    mode: str,
    *,
    plan_log: str | None = None,
    invoker: str | None = None,
) -> ReplicationRun:
    """Claim ``flow`` and start its run loop: ``available-now`` drains what is there and
    stops; ``continuous`` runs lease after lease until stopped. ``plan_log``: where its plan log is
    (default: storage.plan_logs/<source>_to_<target>)."""
    from srm.replication.slot_daemons import Warmup

    # The slots' workers first: their start is the longest step before the first batch (the
    # imports below take a few hundred milliseconds of it otherwise).
    warmup = Warmup(spark, flow.name, flow.settings.tasks_max)
    try:
        from srm.kafka import clients
        from srm.kafka.internal_topics import ensure_internal_topic, flow_internal_topics
        from srm.kafka.topics import broker_count
        from srm.replication.batch import BatchRunner
        from srm.replication.lease import LeaseRunner
        from srm.replication.ownership import FlowOwner
        from srm.replication.plan_log import PlanLog
        from srm.replication.planner import Planner
        from srm.replication.run_loop import RunLoop

        for alias in (flow.source, flow.target):
            clients.check_reachable(config.cluster(alias))
        for topic in flow_internal_topics(flow):
            admin = clients.admin_client(config.cluster(topic.cluster))
            ensure_internal_topic(admin, topic, broker_count(admin))
        location = plan_log or plan_log_dir(config, flow)
        plans = PlanLog(spark, location)
        owner = FlowOwner(config.cluster(flow.target), flow, invoker)
        owner.claim(flow.settings.tasks_max, mode)
        runner_class = LeaseRunner if mode == "continuous" else BatchRunner
        runner = runner_class(spark, config, flow, plans.query_id(), owner, warmup=warmup)
    except BaseException:
        warmup.cancel()  # the run does not start: its warm-up goes with it
        raise
    planner = Planner(str(Path(config.file).resolve()), flow.source, flow.target, mode)
    if isinstance(runner, LeaseRunner):
        runner.plan_ahead = planner.snapshot_ahead
    loop = RunLoop(spark, planner, runner, plans, mode)
    loop.start()
    log.info("flow %s: replication started (%s), plan log %s", flow.name, mode, location)
    return ReplicationRun(loop, runner, owner)


@dataclass
class ReplicationRun:
    """A running replication: its run loop (:class:`~srm.replication.run_loop.RunLoop`), the runner
    that copies and accounts for its batches, and the flow's ownership."""

    loop: Any
    runner: Any
    owner: Any
    released: bool = False
    # wait() (the job's main thread) and stop() (a signal handler's thread) both release the run;
    # the owner's producer must not be driven by both at once.
    _release_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wait(self) -> None:
        """Until the run loop ends; its failure becomes the project's own error with the message it carried."""
        from srm.replication.run_loop import run_error

        try:
            while self.loop.is_alive():
                self.loop.join(1.0)
        finally:
            self._release(failed=self.loop.error is not None)
        if self.loop.error is not None:
            error = run_error(self.loop.error)
            self.runner.states.failed(str(error))  # for the status, however the run was started
            raise error from None

    def stop(self, timeout_s: float = 60.0) -> None:
        """Gracefully: the running lease ends with its copiers committing, then the run loop stops."""
        self.loop.stopping.set()
        request = getattr(self.runner, "request_stop", None)
        if request is not None:
            request()
            self.runner.idle.wait(timeout_s)
        self.loop.stop(timeout_s)
        self._release()

    def _release(self, *, failed: bool = False) -> None:
        with self._release_lock:
            if self.released:
                return
            self.released = True
            self._close(failed)

    def _close(self, failed: bool = False) -> None:
        # A failed run (maybe a cluster that does not answer) ends soon: what the accounting has not
        # written, the next run's accounting ingests; a copier that misses the stop record stops
        # after its lease's grace.
        self.runner.close(*((FAILED_CLOSE_S,) if failed else ()))
        try:
            self.owner.stop(
                *((FAILED_CLOSE_S,) if failed else ())
            )  # copiers still running (a failed lease) commit and stop
        except SrmError as exc:  # taken over meanwhile: the new owner's record stays
            log.info("flow %s: not marking the run stopped: %s", self.runner.flow.name, exc)
        self.owner.close()


def await_run(run: ReplicationRun) -> None:
    run.wait()
