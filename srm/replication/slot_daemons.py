"""Spark's Python workers of copy slots: started ahead of a run's first batch, their daemons
stopped when the slots are no longer used.

Each copy slot runs in a Python worker of its own environment (``SLOT_VARIABLE`` names the slot,
see :mod:`srm.replication.batch`), and Spark keeps one ``pyspark.daemon`` per environment (about
35 MiB) for as long as the application runs, whether or not a task of that environment ever comes
again. When ``tasks.max`` is lowered, the daemons of the slots above it would stay until the driver
stops (bench.soak: +35 MiB after each ``tasks.max`` 2 -> 3 -> 2).

In local mode the executor is the driver's JVM, so the driver stops them: a slot unused for
``RETIRE_AFTER_S`` has its daemon terminated (its workers go with it). Spark closes an idle
worker itself after a minute, checks that an idle worker is alive before it reuses one, and starts
a daemon again when it cannot reach it, so a slot that comes back later gets a fresh daemon.
On a cluster the executors' JVMs are elsewhere and their daemons stay, one per slot ever used,
bounded by the highest ``tasks.max``.

A run starts its slots' workers (:class:`Warmup`) while it creates its internal topics, claims the
flow and makes its first plan. Spark starts the daemons of its Python environments one at a time
(``SparkEnv.createPythonWorker`` is synchronized), each a Python start-up, and each worker then
imports the copier: without the warm-up the first batch's slots began to copy a second or more
apart (100 topics: 1.1-1.5 s), the last one after every other slot's start-up. The first batch
waits for the warm-up's job to end, so each slot's first task is handed its warmed, idle worker
(a task submitted while the warm-up still ran was once given a second worker of its slot).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

log = logging.getLogger(__name__)

SLOT_VARIABLE = "SRM_COPY_SLOT"
# A copier without a renewal stops 30 s after its lease ended (resident.GRACE_S), Spark closes an
# idle worker after 60 s without a task of its environment, and looks every 10 s: well after both.
RETIRE_AFTER_S = 150.0
DAEMON_MODULE = "pyspark.daemon"
WARMUP_WAIT_S = 120.0  # the first batch's longest wait for the warm-up; then it starts without it
# A cluster's executors register with the driver after the application starts, one by one: how
# long a continuous flow's first lease waits for cores for all its slots before it fails.
EXECUTORS_WAIT_S = 60.0


def slot_rdd(context: Any, flow: str, slot: int, items: list[Any], task: Callable[[Any], Any]) -> Any:
    """An RDD of one task, ``task`` over ``items``, in a Python worker of ``flow``'s ``slot``.

    Spark keeps a pool of Python workers per distinct environment, so a variable naming the
    slot pins it to one worker, whose transactional producer stays initialised between
    batches (re-initialising a producer that just committed costs about 0.5 s: the broker
    finishes the previous transaction first) and whose resident copier goes on between
    leases in continuous mode. Not thread-safe: it sets the context's environment while it builds.
    """
    context.environment[SLOT_VARIABLE] = slot_value(flow, slot)
    try:
        rdd = context.parallelize(items, 1).flatMap(task)
        rdd._jrdd  # noqa: B018 - builds the Java RDD now, capturing this environment
    finally:
        context.environment.pop(SLOT_VARIABLE, None)
    return rdd


def task_slots(context: Any, wanted: int, wait_s: float = EXECUTORS_WAIT_S) -> int:
    """How many tasks the application runs at once (Spark's default parallelism). On a cluster
    master that is the cores of the executors registered so far (at least 2), so it waits up to
    ``wait_s`` for it to reach ``wanted``; a local master's is fixed."""
    deadline = time.monotonic() + wait_s
    while (running := int(context.defaultParallelism)) < wanted and not str(context.master).startswith("local"):
        if time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    return running


def warm(slot: int) -> list[tuple[int, int, int]]:
    """The warm-up's task in a slot's Python worker: import what the slot's copy tasks import;
    (slot, the worker's pid, its daemon's pid)."""
    import os

    import srm.replication.drain
    import srm.replication.resident  # noqa: F401

    return [(slot, os.getpid(), os.getppid())]


class Warmup:
    """A Spark job of one :func:`warm` task per slot, run in the background from its creation."""

    def __init__(self, spark: Any, flow: str, slots: int) -> None:
        context = spark.sparkContext
        self.flow = flow
        self.slots = slots
        self.group = f"srm {flow} warm-up"  # its Spark job group
        self.workers: dict[int, tuple[int, int]] = {}  # slot -> (worker pid, daemon pid), once done
        self._context = context
        self._cancelled = threading.Event()
        rdds = [slot_rdd(context, flow, slot, [slot], warm) for slot in range(slots)]
        rdd = rdds[0] if len(rdds) == 1 else context.union(rdds)
        self._thread = threading.Thread(target=self._run, args=(context, rdd), name="srm-warmup", daemon=True)
        self._thread.start()

    def _run(self, context: Any, rdd: Any) -> None:
        context.setJobGroup(self.group, f"flow {self.flow}: the copy slots' Python workers started", True)
        started = time.monotonic()
        try:
            if self._cancelled.is_set():
                return
            self.workers = {slot: (worker, daemon) for slot, worker, daemon in rdd.collect()}
            log.info(
                "flow %s: the Python workers of %d copy slot(s) started in %.1f s",
                *(self.flow, self.slots, time.monotonic() - started),
            )
        except Exception as exc:  # the application stopping, or workers that cannot start (the batch says why)
            log.debug("flow %s: starting the copy slots' Python workers ahead failed: %s", self.flow, exc)

    def wait(self, timeout_s: float = WARMUP_WAIT_S) -> None:
        """Until the warm-up's job has ended (at most ``timeout_s``)."""
        self._thread.join(timeout_s)

    def cancel(self) -> None:
        """Stop the warm-up's job if it still runs: a run that ends before its first batch (it
        could not start, or was stopped) leaves no Spark job behind."""
        self._cancelled.set()
        if self._thread.is_alive():
            self._context.cancelJobGroup(self.group)


def slot_value(flow: str, slot: int) -> str:
    """The value of SLOT_VARIABLE in the environment of ``flow``'s ``slot``."""
    return f"{flow}#{slot}"


class SlotDaemons:
    """The slots a flow's leases use, and when each was last used."""

    def __init__(self, flow: str, jvm_pid: int | None) -> None:
        self.flow = flow
        self.jvm_pid = jvm_pid  # the executor's JVM, when it is the driver's (local mode); else None
        self.last_used: dict[int, float] = {}

    def used(self, slots: Iterable[int], now: float | None = None) -> list[int]:
        """Note the slots of a lease; stop the daemons of slots unused for RETIRE_AFTER_S. The pids
        terminated."""
        now = time.monotonic() if now is None else now
        for slot in slots:
            self.last_used[slot] = now
        retired = sorted(s for s, at in self.last_used.items() if now - at >= RETIRE_AFTER_S)
        for slot in retired:
            del self.last_used[slot]
        if not retired or self.jvm_pid is None:
            return []
        stopped = stop_daemons(self.jvm_pid, {slot_value(self.flow, s) for s in retired})
        if stopped:
            log.info(
                "flow %s: slot(s) %s unused for %.0f s (tasks.max lowered): their Python daemon(s) %s stopped",
                *(self.flow, ", ".join(map(str, retired)), RETIRE_AFTER_S, ", ".join(map(str, stopped))),
            )
        return stopped


def stop_daemons(jvm_pid: int, slots: set[str]) -> list[int]:
    """Terminate the ``pyspark.daemon`` children of ``jvm_pid`` whose SLOT_VARIABLE is one of
    ``slots``; their pids."""
    import psutil  # the driver's; the copiers' workers import this module without using it

    stopped = []
    try:
        children = psutil.Process(jvm_pid).children()
    except psutil.Error:
        return []
    for child in children:
        try:
            if DAEMON_MODULE not in child.cmdline() or child.environ().get(SLOT_VARIABLE) not in slots:
                continue
            child.terminate()
            stopped.append(child.pid)
        except psutil.Error:  # gone meanwhile, or not ours to read
            continue
    return stopped
