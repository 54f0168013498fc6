"""The next lease's snapshot taken while the last lease ends (Planner.snapshot_ahead): used once by
the next plan, and asked for again when it failed."""

from __future__ import annotations

import threading
from concurrent import futures
from types import SimpleNamespace
from typing import Any

import pytest

from srm.errors import ClusterUnreachableError
from srm.replication.planner import Planner


def planner(snapshots: list[Any]) -> tuple[Planner, list[str]]:
    """A planner whose snapshots are ``snapshots`` in turn (an exception is raised), noting the
    thread of each call."""
    made = Planner.__new__(Planner)
    made.flow = SimpleNamespace(name="west->east")  # type: ignore[assignment]
    made._ahead = futures.ThreadPoolExecutor(max_workers=1)
    made._early = None
    threads: list[str] = []

    def snapshot() -> Any:
        threads.append(threading.current_thread().name)
        answer = snapshots.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    made.snapshot = snapshot  # type: ignore[method-assign]
    return made, threads


def test_the_snapshot_taken_ahead_is_the_next_plans_once() -> None:
    ahead, later = ({("t", 0): 5}, {"t": "id"}), ({("t", 0): 9}, {"t": "id"})
    made, threads = planner([ahead, later])
    made.snapshot_ahead()
    made.snapshot_ahead()  # already under way: not asked twice
    assert made._snapshot_now() == ahead
    assert made._snapshot_now() == later  # the next plan asks anew
    assert threads[0] != threading.current_thread().name and threads[1] == threading.current_thread().name


def test_a_snapshot_ahead_that_failed_is_asked_for_again_and_raises_as_the_plan_would() -> None:
    unreachable = ClusterUnreachableError("cannot list offsets on west: no answer", cluster="west")
    made, threads = planner([unreachable, unreachable])
    made.snapshot_ahead()
    with pytest.raises(ClusterUnreachableError, match="no answer"):
        made._snapshot_now()
    assert len(threads) == 2
