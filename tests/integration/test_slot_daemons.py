"""A copy slot no longer used has its Python daemon stopped, and Spark starts it again when the
slot comes back (real Spark in local mode: the daemons are children of its JVM)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from typing import Any

import psutil

from srm.replication.slot_daemons import RETIRE_AFTER_S, SLOT_VARIABLE, SlotDaemons, Warmup, slot_value, stop_daemons


def where(_: Any) -> tuple[int, int]:
    return os.getpid(), os.getppid()  # the worker and its daemon


def run_in_slot(context: Any, flow: str, slot: int, task: Callable[[Any], Any] = where) -> Any:
    """A task in the Python worker of ``flow``'s ``slot``, as srm.replication.batch runs a lease."""
    context.environment[SLOT_VARIABLE] = slot_value(flow, slot)
    try:
        rdd = context.parallelize([slot], 1).map(task)
        rdd._jrdd  # noqa: B018 - captures this environment
    finally:
        context.environment.pop(SLOT_VARIABLE, None)
    return rdd.collect()[0]


def test_a_retired_slots_daemon_is_stopped_and_started_again_when_the_slot_comes_back(spark: Any) -> None:
    context = spark.sparkContext
    flow = f"daemons-{uuid.uuid4().hex[:6]}"
    before = {slot: run_in_slot(context, flow, slot) for slot in (0, 1, 2)}
    assert len({daemon for _, daemon in before.values()}) == 3  # a daemon per slot

    retired = [psutil.Process(pid) for pid in before[2]]
    daemons = SlotDaemons(flow, int(context._jvm.java.lang.ProcessHandle.current().pid()))
    daemons.used([0, 1, 2], now=0.0)
    assert daemons.used([0, 1], now=RETIRE_AFTER_S) == [before[2][1]]
    _, alive = psutil.wait_procs(retired, timeout=10)
    assert alive == []  # slot 2's daemon, and its worker with it

    assert run_in_slot(context, flow, 0) == before[0]  # the slots in use keep their worker
    worker, daemon = run_in_slot(context, flow, 2)  # the slot comes back: a new daemon and worker
    assert daemon != before[2][1] and psutil.Process(daemon).is_running()
    assert run_in_slot(context, flow, 2) == (worker, daemon)  # and keeps them


def imports(_: Any) -> tuple[int, bool]:
    import sys

    return os.getpid(), "srm.replication.resident" in sys.modules


def test_the_warmup_starts_every_slots_worker_and_each_slots_first_task_is_handed_it(spark: Any) -> None:
    context = spark.sparkContext
    flow = f"warm-{uuid.uuid4().hex[:6]}"
    warmup = Warmup(spark, flow, 2)
    warmup.wait()
    assert sorted(warmup.workers) == [0, 1]
    (worker0, daemon0), (worker1, daemon1) = warmup.workers[0], warmup.workers[1]
    assert daemon0 != daemon1, "a daemon per slot"
    for slot, worker in ((0, worker0), (1, worker1)):
        # the warmed worker, with the copier imported already: no second worker in the slot's pool
        assert run_in_slot(context, flow, slot, imports) == (worker, True)
    stop_daemons(int(context._jvm.java.lang.ProcessHandle.current().pid()), {slot_value(flow, 0), slot_value(flow, 1)})


def test_a_cancelled_warmup_leaves_no_spark_job_behind(spark: Any) -> None:
    """A run that ends before its first batch (it could not start) cancels its warm-up."""
    tracker = spark.sparkContext.statusTracker()
    warmup = Warmup(spark, f"cancel-{uuid.uuid4().hex[:6]}", 2)

    def active() -> list[int]:
        return [j for j in tracker.getJobIdsForGroup(warmup.group) if tracker.getJobInfo(j).status == "RUNNING"]

    deadline = time.monotonic() + 30
    while not active():  # a new flow's slots: its daemons take a second or more to start
        assert warmup.workers == {} and time.monotonic() < deadline, "the warm-up ended before it could be cancelled"
        time.sleep(0.01)
    warmup.cancel()
    warmup.wait(30)
    assert active() == [] and warmup.workers == {}, "the warm-up's job ran on after its run ended"
