"""The Python daemons of copy slots no longer used are stopped, those of slots in use never (real
processes standing in for Spark's: children of this process, with the slot in their environment)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from srm.replication.slot_daemons import RETIRE_AFTER_S, SLOT_VARIABLE, SlotDaemons, slot_value

SLEEP = "import time; time.sleep(120)"


@pytest.fixture
def daemons() -> Iterator[dict[str, subprocess.Popen[bytes]]]:
    """A stand-in ``pyspark.daemon`` per slot of flow a->b, one of another flow, and a worker that
    is not a daemon: children of this process, as Spark's are of its JVM."""
    started = {}
    for name, value, module in (
        ("slot0", slot_value("a->b", 0), "pyspark.daemon"),
        ("slot1", slot_value("a->b", 1), "pyspark.daemon"),
        ("slot2", slot_value("a->b", 2), "pyspark.daemon"),
        ("other-flow", slot_value("c->b", 2), "pyspark.daemon"),
        ("not-a-daemon", slot_value("a->b", 2), "pyspark.worker"),
    ):
        # argv as Spark starts it: python -m pyspark.daemon (here: a command that only sleeps)
        argv = [sys.executable, "-c", SLEEP, "-m", module]
        started[name] = subprocess.Popen(argv, env={**os.environ, SLOT_VARIABLE: value})
    yield started
    for process in started.values():
        process.kill()
        process.wait()


def test_a_slot_unused_for_the_retire_time_has_its_daemon_stopped_and_only_it(
    daemons: dict[str, subprocess.Popen[bytes]],
) -> None:
    slots = SlotDaemons("a->b", os.getpid())
    assert slots.used([0, 1, 2], now=0.0) == []
    assert slots.used([0, 1], now=RETIRE_AFTER_S - 1) == []  # slot 2 unused, not for long enough yet
    stopped = slots.used([0, 1], now=RETIRE_AFTER_S + 1)
    assert stopped == [daemons["slot2"].pid]
    assert daemons["slot2"].wait(10) != 0  # terminated
    alive = [name for name, p in daemons.items() if p.poll() is None]
    assert alive == ["slot0", "slot1", "other-flow", "not-a-daemon"]
    assert slots.used([0, 1], now=2 * RETIRE_AFTER_S) == []  # once: slot 2 is no longer tracked


def test_on_a_cluster_nothing_is_stopped(daemons: dict[str, subprocess.Popen[bytes]]) -> None:
    slots = SlotDaemons("a->b", None)  # the executors' JVMs are elsewhere
    slots.used([0, 1, 2], now=0.0)
    assert slots.used([0], now=10 * RETIRE_AFTER_S) == []
    assert all(p.poll() is None for p in daemons.values())


class Registering:
    """A SparkContext's default parallelism as executors register: ``steps`` values, one a look."""

    def __init__(self, master: str, steps: list[int]) -> None:
        self.master = master
        self.steps = steps
        self.looks = 0

    @property
    def defaultParallelism(self) -> int:
        value = self.steps[min(self.looks, len(self.steps) - 1)]
        self.looks += 1
        return value


def test_a_cluster_flow_waits_for_its_executors_cores_and_a_local_one_does_not() -> None:
    from srm.replication.slot_daemons import task_slots

    cluster = Registering("spark://127.0.0.1:7077", [2, 2, 2, 4])  # the second executor registers
    assert task_slots(cluster, 4, wait_s=5) == 4 and cluster.looks == 4
    local = Registering("local[*, 4]", [2, 4])
    assert task_slots(local, 4, wait_s=5) == 2 and local.looks == 1  # a local master's cores are fixed
    short = Registering("spark://127.0.0.1:7077", [2])
    started = time.monotonic()
    assert task_slots(short, 4, wait_s=0.5) == 2  # never enough: what it has after the wait
    assert 0.5 <= time.monotonic() - started < 2


def test_slots_stay_on_their_executor_and_only_what_exceeds_a_share_moves() -> None:
    from srm.replication.slot_daemons import place

    first = place({}, range(4), ["0"])  # the first batch: one executor registered so far
    assert first == {0: "0", 1: "0", 2: "0", 3: "0"}
    second = place(first, range(4), ["0", "1"])  # the second executor came: two slots move to it
    assert second == {0: "0", 1: "0", 2: "1", 3: "1"}
    assert place(second, range(4), ["0", "1"]) == second  # nothing changed: nothing moves
    # executor 0 lost: its slots go to the one left; the slots of executor 1 stay where they are
    assert place(second, range(4), ["1", "2"]) == {0: "2", 1: "2", 2: "1", 3: "1"}
    # tasks.max lowered to 2, then raised again: kept slots stay, new ones go to the emptiest
    assert place(second, [0, 2], ["0", "1"]) == {0: "0", 2: "1"}
    assert place({0: "0", 2: "1"}, range(3), ["0", "1"]) == {0: "0", 1: "0", 2: "1"}
    assert place(second, range(4), []) == {} and place(second, [], ["0"]) == {}


class Executors:
    """A SparkContext of a cluster master whose executors register one after the other."""

    def __init__(self, master: str, steps: list[dict[str, str]], cores_each: int = 2) -> None:
        self.master, self.steps, self.cores_each, self.looks = master, steps, cores_each, 0
        self.now: dict[str, str] = {}

    def registered(self) -> dict[str, str]:
        self.now = self.steps[min(self.looks, len(self.steps) - 1)]
        self.looks += 1
        return self.now

    @property
    def defaultParallelism(self) -> int:  # Spark's: the executors' cores, at least 2
        return max(2, self.cores_each * len(self.now))


def test_slots_name_their_executor_on_a_cluster_and_none_on_a_local_master(monkeypatch: pytest.MonkeyPatch) -> None:
    from srm.replication import slot_daemons

    cluster = Executors("spark://127.0.0.1:7077", [{"0": "10.0.0.5", "1": "10.0.0.6"}])
    monkeypatch.setattr(slot_daemons, "registered_executors", lambda context: context.registered())
    where = slot_daemons.SlotExecutors(cluster)
    assert where.locations(range(3)) == {0: "executor_10.0.0.5_0", 1: "executor_10.0.0.6_1", 2: "executor_10.0.0.5_0"}
    assert where.locations([2]) == {2: "executor_10.0.0.5_0"}  # the next batch of slot 2 goes where it went

    monkeypatch.undo()
    assert slot_daemons.SlotExecutors(Registering("local[*, 4]", [2])).locations(range(2)) == {}


def test_the_warm_up_waits_for_executors_until_every_slot_has_a_core_or_none_comes_any_more(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from srm.replication import slot_daemons

    monkeypatch.setattr(slot_daemons, "registered_executors", lambda context: context.registered())
    one, two = {"0": "h"}, {"0": "h", "1": "h"}
    coming = Executors("spark://127.0.0.1:7077", [{}, {}, one, one, two])
    assert slot_daemons.task_slots(coming, 4, wait_s=5, quiet_s=2) == 4
    assert coming.looks == 5  # returned as the second executor's cores made 4
    started = time.monotonic()
    alone = Executors("spark://127.0.0.1:7077", [{}, one])  # a cluster of one worker: 2 cores for 4 slots
    assert slot_daemons.task_slots(alone, 4, wait_s=30, quiet_s=0.5) == 2
    assert 0.5 <= time.monotonic() - started < 2  # not the whole wait: none came for quiet_s
    never = Executors("spark://127.0.0.1:7077", [{}])
    assert slot_daemons.task_slots(never, 4, wait_s=0.5, quiet_s=0.1) == 0
