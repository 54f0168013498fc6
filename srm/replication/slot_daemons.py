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

On a cluster master Spark hands a task without a preferred place to any executor with a free core,
chosen at random: a slot's next task would often land on another executor, where its slot has no
worker yet (a Python start-up and the copier's imports), its transactional producer is initialised
again and fences the one left behind, and in continuous mode the resident copier that was copying
is lost. So each slot's tasks name an executor (:class:`SlotExecutors`, Spark's executor
locality): the same one from task to task while it is registered and not holding more than its
share of the slots.

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

from srm.spark.session import is_local

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
# The warm-up on a cluster waits for executors until they have a core for every slot, or until
# none has registered for this long since the last one (a master starts them all at once: they
# register within a second or two of each other).
REGISTRATION_QUIET_S = 3.0
EXECUTOR_LOCATION = "executor_{host}_{executor}"  # Spark's TaskLocation of one executor
_ENVIRONMENT = threading.Lock()  # slot_rdd sets the context's environment while it builds


def on_local_master(context: Any) -> bool:
    """Whether ``context`` runs on a local master: its one executor is the driver's JVM."""
    return is_local(str(context.master))


def slot_rdd(
    context: Any, flow: str, slot: int, items: list[Any], task: Callable[[Any], Any], *, location: str | None = None
) -> Any:
    """An RDD of one task, ``task`` over ``items``, in a Python worker of ``flow``'s ``slot``; on
    the executor ``location`` names (:class:`SlotExecutors`), if given.

    Spark keeps a pool of Python workers per distinct environment, so a variable naming the
    slot pins it to one worker, whose transactional producer stays initialised between
    batches (re-initialising a producer that just committed costs about 0.5 s: the broker
    finishes the previous transaction first) and whose resident copier goes on between
    leases in continuous mode.
    """
    with _ENVIRONMENT:
        context.environment[SLOT_VARIABLE] = slot_value(flow, slot)
        try:
            items_rdd = context.parallelize(items, 1) if location is None else located(context, items, location)
            rdd = items_rdd.flatMap(task)
            rdd._jrdd  # noqa: B018 - builds the Java RDD now, capturing this environment
        finally:
            context.environment.pop(SLOT_VARIABLE, None)
    return rdd


def located(context: Any, items: list[Any], location: str) -> Any:
    """``context.parallelize(items, 1)`` whose one partition prefers ``location`` (Spark's
    ``makeRDD`` with location preferences, which PySpark does not expose): the same pickled
    batch the Python worker reads from a parallelized RDD."""
    from pyspark import RDD
    from pyspark.serializers import BatchedSerializer, CPickleSerializer

    jvm = context._jvm
    element = (CPickleSerializer().dumps(list(items)), jvm.PythonUtils.toSeq([location]))  # type: ignore[no-untyped-call]
    java_rdd = context._jsc.sc().makeRDD(
        jvm.PythonUtils.toSeq([jvm.scala.Tuple2(*element)]),
        jvm.scala.reflect.ClassTag.apply(jvm.java.lang.Class.forName("[B")),  # its elements: byte[]
    )
    batched = BatchedSerializer(CPickleSerializer(), max(1, len(items)))  # type: ignore[no-untyped-call]
    return RDD(java_rdd.toJavaRDD(), context, batched)


def registered_executors(context: Any) -> dict[str, str]:
    """The active executors of the application of a cluster master: id -> host, in the order of
    their ids (Spark's status store, what its UI's executors page shows); none on a local master
    (the driver's JVM is its one executor)."""
    if on_local_master(context):
        return {}
    listed = context._jsc.sc().statusStore().executorList(True)  # the active ones
    found = {
        str(executor.id()): str(executor.hostPort()).rsplit(":", 1)[0]
        for executor in context._jvm.scala.jdk.javaapi.CollectionConverters.asJava(listed)
        if str(executor.id()) != "driver"
    }
    return dict(sorted(found.items(), key=lambda item: (len(item[0]), item[0])))


def place(previous: dict[int, str], slots: Iterable[int], executors: list[str]) -> dict[int, str]:
    """Each slot's executor: where it was before, unless that executor is gone or would hold more
    than its share (the slots over the executors, rounded up); the rest each on the executor that
    holds the fewest, the first of them on a tie."""
    wanted = sorted(set(slots))
    if not executors or not wanted:
        return {}
    share = -(-len(wanted) // len(executors))
    load = dict.fromkeys(executors, 0)
    placed: dict[int, str] = {}
    for slot in wanted:
        were = previous.get(slot)
        if were in load and load[were] < share:
            placed[slot] = were
            load[were] += 1
    for slot in wanted:
        if slot not in placed:
            fewest = min(executors, key=lambda executor: load[executor])
            placed[slot] = fewest
            load[fewest] += 1
    return placed


class SlotExecutors:
    """The executor each copy slot's tasks run on, on a cluster master (see the module's doc); a
    local master has one executor, so no slot names one."""

    def __init__(self, context: Any) -> None:
        self._context = context
        self._lock = threading.Lock()
        self.placed: dict[int, str] = {}  # slot -> executor id, as last handed out

    def locations(self, slots: Iterable[int]) -> dict[int, str]:
        """Spark's location of each of ``slots``' executor, placed again (:func:`place`) over the
        executors registered now; empty on a local master or before any executor registered."""
        wanted = list(slots)
        executors = registered_executors(self._context)
        with self._lock:
            placed = place(self.placed, wanted, list(executors))
            if placed:
                moved = sorted(s for s, e in placed.items() if self.placed.get(s) not in (None, e))
                if moved:
                    log.info("copy slot(s) %s moved to other executors (one was lost or others came)", moved)
                self.placed = {**self.placed, **placed}
        return {slot: EXECUTOR_LOCATION.format(host=executors[e], executor=e) for slot, e in placed.items()}


def task_slots(context: Any, wanted: int, wait_s: float = EXECUTORS_WAIT_S, quiet_s: float | None = None) -> int:
    """How many tasks the application runs at once (Spark's default parallelism). On a cluster
    master that is the cores of the executors registered so far (at least 2), so it waits up to
    ``wait_s`` for it to reach ``wanted``; a local master's is fixed.

    With ``quiet_s`` (the warm-up, which places slots on executors): it also counts the executors
    registered, waits for the first one, stops once none more has come for ``quiet_s`` (a cluster
    with fewer cores than ``wanted``), and gives 0 when none came within ``wait_s``."""
    if on_local_master(context):
        return int(context.defaultParallelism)
    started = last_change = time.monotonic()
    deadline, seen = started + wait_s, 0
    while True:
        now = time.monotonic()
        if quiet_s is not None and (count := len(registered_executors(context))) != seen:
            seen, last_change = count, now
        running = int(context.defaultParallelism)
        settled = quiet_s is None or seen > 0
        if settled and (running >= wanted or (quiet_s is not None and now - last_change >= quiet_s)):
            return running
        if now >= deadline:
            return running if settled else 0
        time.sleep(0.2)


def warm(slot: int) -> list[tuple[int, int, int]]:
    """The warm-up's task in a slot's Python worker: import what the slot's copy tasks import;
    (slot, the worker's pid, its daemon's pid)."""
    import os

    import srm.replication.drain
    import srm.replication.resident  # noqa: F401

    return [(slot, os.getpid(), os.getppid())]


class Warmup:
    """A Spark job of one :func:`warm` task per slot, run in the background from its creation.
    On a cluster master it first waits for executors (:func:`task_slots` with a quiet time) and
    places the slots on them, where their copy tasks go after it."""

    def __init__(self, spark: Any, flow: str, slots: int) -> None:
        """``slots``: the flow's ``tasks.max``; as many as the application has cores for are warmed."""
        context = spark.sparkContext
        self.flow = flow
        self.wanted = slots
        self.slots = min(slots, int(context.defaultParallelism))  # on a cluster: again once executors came
        self.group = f"srm {flow} warm-up"  # its Spark job group
        self.workers: dict[int, tuple[int, int]] = {}  # slot -> (worker pid, daemon pid), once done
        self.executors = SlotExecutors(context)
        self._context = context
        self._cancelled = threading.Event()
        # a local master's job is built here, before the caller builds any other
        rdd = self._rdd(context, {}) if on_local_master(context) else None
        self._thread = threading.Thread(target=self._run, args=(context, rdd), name="srm-warmup", daemon=True)
        self._thread.start()

    def _rdd(self, context: Any, locations: dict[int, str]) -> Any:
        rdds = [
            slot_rdd(context, self.flow, slot, [slot], warm, location=locations.get(slot)) for slot in range(self.slots)
        ]
        return rdds[0] if len(rdds) == 1 else context.union(rdds)

    def _run(self, context: Any, rdd: Any) -> None:
        context.setJobGroup(self.group, f"flow {self.flow}: the copy slots' Python workers started", True)
        started = time.monotonic()
        try:
            if rdd is None:  # a cluster master: where its executors are
                cores = task_slots(context, self.wanted, quiet_s=REGISTRATION_QUIET_S)
                self.slots = max(1, min(self.wanted, cores))
                rdd = self._rdd(context, self.executors.locations(range(self.slots)))
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
