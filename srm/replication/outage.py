"""A fault that looks transient but does not go away, and how long a copier lives with it.

A delivery time-out, ``NOT_ENOUGH_REPLICAS`` while a target's ISR stays short, a target that does
not answer: each aborts the open transaction, and the copier reads the records again from the
committed progress and tries once more. Re-reading produces records, so nothing looks stalled,
and without a bound such a flow would retry until Airflow's task time-out while every status
says "running". An :class:`Outage` is the clock of one slot's failures: it starts at the first
failure after a commit, the next commit stops it, and once it has run for the flow's
``errors.retry.timeout`` the failure in hand ends the task with :class:`LastingFaultError`, which
names the cluster, the partitions and offsets waiting, the broker's error and what to do. With
``errors.retry.timeout: -1`` the copier waits for good instead and says every minute what for.

One outage per slot lives in the worker's client cache (:mod:`.clientcache`), so a task that
Spark starts again after a failure goes on counting from the first failure, not from zero.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar, cast

from srm.errors import LastingFaultError
from srm.replication.heap import trim_heap

if TYPE_CHECKING:
    from srm.replication.clientcache import ClientCache
    from srm.replication.job import CopyJob

log = logging.getLogger(__name__)

RETRY_PAUSE_S = 0.2  # between two attempts of a transaction call that failed with a retriable error
T = TypeVar("T")
WAITING_LOG_EVERY_S = 60.0  # how often a copier that waits says what for


class Outage:
    def __init__(self, clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self._clock, self._wall = clock, wall
        self.started: float | None = None  # monotonic time of the first failure since the last commit
        self.since_ms = 0  # the same moment, wall clock (for the message)
        self.failures = 0
        self.cause = ""
        self._next_log = 0.0

    @property
    def ongoing(self) -> bool:
        return self.started is not None

    def recovered(self) -> None:
        """A transaction committed: the fault is over, and what was buffered during it is freed."""
        if self.started is None:
            return
        if self.failures > 1:
            log.info("recovered after %d failed attempt(s) over %.0f s: %s", self.failures, self.elapsed(), self.cause)
        self.started, self.failures, self.cause = None, 0, ""
        trim_heap()

    def elapsed(self) -> float:
        return 0.0 if self.started is None else self._clock() - self.started

    def remaining(self, timeout_ms: int) -> float | None:
        """Seconds left before the bound (None: waiting for good); the whole bound before a failure."""
        if timeout_ms < 0:
            return None
        return max(0.0, timeout_ms / 1000 - self.elapsed())

    def began(self, cause: str, waited_s: float = 0.0) -> None:
        """A failure is seen (before it is dealt with, e.g. by aborting a transaction, whose wait is
        then bounded by what is left): the clock starts, ``waited_s`` ago when what failed had been
        waiting that long (a record not acknowledged within its delivery time-out)."""
        if self.started is None:
            now = self._clock()
            self.started, self.since_ms = now - waited_s, int((self._wall() - waited_s) * 1000)
            self._next_log = now + WAITING_LOG_EVERY_S
        self.cause = cause

    def failed(self, cause: str, timeout_ms: int, where: Callable[[], str], waited_s: float = 0.0) -> None:
        """Another failed attempt (``waited_s``: how long it waited before it failed). Past
        ``timeout_ms`` since the fault began: LastingFaultError, whose message is ``where()`` (what
        was being done, on which cluster and partitions) with the cause, how long and how often it
        failed, and the remedy; the clock starts again for whatever comes next. Waiting for good
        (-1): a log line a minute."""
        self.began(cause, waited_s)
        now = self._clock()
        started = now if self.started is None else self.started
        self.failures += 1
        if 0 <= timeout_ms <= 1000 * (now - started):
            message = self.message(where(), timeout_ms, now - started)
            self.started, self.failures, self.cause = None, 0, ""
            raise LastingFaultError(message)
        if now >= self._next_log:
            self._next_log = now + WAITING_LOG_EVERY_S
            bound = "for good (errors.retry.timeout: -1)" if timeout_ms < 0 else f"up to {timeout_ms / 1000:.0f} s"
            log.warning("%s: waiting since %s %s: %s", where(), self.since(), bound, cause)

    def since(self) -> str:
        return datetime.fromtimestamp(self.since_ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

    def message(self, where: str, timeout_ms: int, elapsed: float) -> str:
        return (
            f"{where}: failing since {self.since()} ({elapsed:.0f} s, {self.failures} attempt(s)): "
            f"{self.cause}. The flow stops after errors.retry.timeout ({timeout_ms} ms): fix the cause "
            "and run the flow again, it resumes from its committed progress; or set errors.retry.timeout: -1 "
            "for the flow to wait instead"
        )


def slot_outage(cache: ClientCache, job: CopyJob) -> Outage:
    """The outage clock of the job's slot, kept in the worker's client cache across the tasks of one
    run of the flow (a new run, whose digest is its id, starts a new clock)."""
    return cast(Outage, cache.client(("outage", job.flow.name, str(job.slot)), Outage, job.owners_run))


def retried(call: Callable[[], T], outage: Outage, timeout_ms: int, where: Callable[[], str], slot: str) -> T:
    """``call()`` of ``slot``, repeated while it fails with a retriable error, up to ``timeout_ms``
    (the flow's errors.retry.timeout) from the first failure since the last commit (LastingFaultError)."""
    from confluent_kafka import KafkaException

    while True:
        started = time.monotonic()
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            if error is None or not error.retriable():
                raise
            first = not outage.ongoing
            outage.failed(error.str(), timeout_ms, where, time.monotonic() - started)
            if first:
                log.warning("%s: %s (retrying)", slot, error.str())
            time.sleep(RETRY_PAUSE_S)
