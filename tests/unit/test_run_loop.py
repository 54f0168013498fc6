"""A pending plan never outranks the flow's configuration: a batch that did not finish runs again
without the topics that left the flow, and says so (srm.replication.run_loop)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from srm.replication import offsets
from srm.replication.plan_log import PlannedBatch
from srm.replication.run_loop import RunLoop

START = offsets.build({("keep", 0): 5, ("gone", 0): 7}, {"keep": "id-k", "gone": "id-g"})
END = offsets.build({("keep", 0): 9, ("gone", 0): 10}, {"keep": "id-k", "gone": "id-g"})


class Plans:
    """The flow's plan log with batch 3 planned and not done (the job failed on it)."""

    def __init__(self) -> None:
        self.pending = PlannedBatch(3, START, END, False)
        self.done_batches: list[int] = []

    def last(self) -> PlannedBatch:
        return self.pending

    def planned(self, batch: int, start: offsets.Offsets, end: offsets.Offsets) -> None:
        raise AssertionError("nothing new to plan in this test")

    def done(self, batch: int) -> None:
        self.done_batches.append(batch)


class Planner:
    """The flow as configured now: it replicates ``topics``; the source holds no more than END."""

    def __init__(self, topics: set[str]) -> None:
        self.topics = topics

    def out_of_flow(self, *plans: offsets.Offsets) -> set[str]:
        return {t for p in plans for t in offsets.topics(p) if t not in self.topics}

    def ranges(self, start: offsets.Offsets, end: offsets.Offsets) -> list[Any]:
        return offsets.ranges(start, end, {t: f"src.{t}" for t in offsets.topics(end)})

    def frozen(self) -> offsets.Offsets:
        return offsets.without(END, {t for t in offsets.topics(END) if t not in self.topics})

    def frozen_after(self, start: offsets.Offsets, frozen: offsets.Offsets) -> offsets.Offsets:
        return start  # nothing after the pending batch

    def close(self) -> None:
        pass


class Runner:
    def __init__(self) -> None:
        self.flow = type("F", (), {"name": "a->b", "target": "b"})()
        self.job_group = "g"
        self.copied: list[tuple[int, list[tuple[str, int, int, int]]]] = []

    def __call__(self, ranges: list[Any], batch: int, phases: Any = None) -> None:
        self.copied.append((batch, [(r.topic, r.partition, r.start, r.end) for r in ranges]))


def run(topics: set[str]) -> tuple[Runner, Plans]:
    runner, plans = Runner(), Plans()
    query = RunLoop(None, Planner(topics), runner, plans, "available-now")  # type: ignore[arg-type]
    query.run()  # in this thread
    assert query.error is None, query.error
    return runner, plans


def test_a_pending_batch_runs_again_without_the_topics_taken_out_of_the_flow(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="srm.replicate"):
        runner, plans = run({"keep"})
    assert runner.copied == [(3, [("keep", 0, 5, 9)])], "the configuration outranks the plan"
    assert plans.done_batches == [3]
    (line,) = [r.getMessage() for r in caplog.records if "did not finish" in r.getMessage()]
    assert "running it again without gone, no longer in the flow" in line
    assert "progress on b is kept: added back, they resume from it" in line


def test_a_pending_batch_of_topics_still_in_the_flow_runs_again_whole() -> None:
    runner, _ = run({"keep", "gone"})
    assert runner.copied == [(3, [("gone", 0, 7, 10), ("keep", 0, 5, 9)])]


def test_a_bug_in_the_planner_is_logged_once_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    class Broken(Planner):
        def out_of_flow(self, *plans: offsets.Offsets) -> set[str]:
            return {}["a key the planner did not have"]  # type: ignore[no-any-return]

    query = RunLoop(None, Broken({"keep"}), Runner(), Plans(), "available-now")  # type: ignore[arg-type]
    with caplog.at_level(logging.ERROR, logger="srm.replicate"):
        query.run()
    assert isinstance(query.error, KeyError)
    (record,) = caplog.records
    assert record.getMessage() == "flow a->b: the replication stopped on an unexpected error"
    assert record.exc_text is not None or record.exc_info is not None
    assert "out_of_flow" in caplog.text, "the traceback names where it happened"
