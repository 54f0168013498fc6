"""The plan log in the checkpoint location, through the Spark session's Hadoop file system."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from srm.replication.plan_log import KEEP, PlanLog

START = {"offsets": {"t": {"0": 5}}, "ids": {"t": "id"}, "initial": {"t": {"0": 5}}}
END = {"offsets": {"t": {"0": 9}}, "ids": {"t": "id"}, "initial": {}}


def test_an_unfinished_batch_is_found_with_its_plan(spark: Any, tmp_path: Path) -> None:
    plans = PlanLog(spark, str(tmp_path / "cp"))
    assert plans.last() is None
    plans.planned(0, START, END)
    last = plans.last()
    assert last is not None and (last.batch, last.start, last.end, last.done) == (0, START, END, False)
    plans.done(0)
    assert plans.last() == last.__class__(0, START, END, True)
    # a second process (the restart) reads the same
    again = PlanLog(spark, f"file://{tmp_path / 'cp'}")
    assert again.last() == plans.last()


def test_query_id_is_kept_across_restarts_and_from_a_spark_checkpoint(spark: Any, tmp_path: Path) -> None:
    first = PlanLog(spark, str(tmp_path / "new")).query_id()
    assert PlanLog(spark, str(tmp_path / "new")).query_id() == first
    old = tmp_path / "spark"
    old.mkdir()
    (old / "metadata").write_text(json.dumps({"id": "a-spark-query-id"}))
    assert PlanLog(spark, str(old)).query_id() == "a-spark-query-id"


def test_only_the_last_batches_are_kept(spark: Any, tmp_path: Path) -> None:
    plans = PlanLog(spark, str(tmp_path / "cp"))
    for batch in range(KEEP + 5):
        plans.planned(batch, START, END)
        plans.done(batch)
    kept = sorted(int(p.name) for p in (tmp_path / "cp" / "plans").iterdir() if p.name.isdigit())
    assert kept == list(range(5, KEEP + 5))
    last = plans.last()
    assert last is not None and last.batch == KEEP + 4 and last.done


class _Planner:
    """Plans of a source that holds ``ends`` (available-now), recording nothing else."""

    def __init__(self, initial: dict[str, Any], frozen: dict[str, Any]) -> None:
        self._initial, self._frozen = initial, frozen

    def initial(self) -> dict[str, Any]:
        return self._initial

    def frozen(self) -> dict[str, Any]:
        return self._frozen

    def frozen_after(self, start: dict[str, Any], frozen: dict[str, Any]) -> dict[str, Any]:
        return start if start["offsets"] == frozen["offsets"] else frozen

    def ranges(self, start: dict[str, Any], end: dict[str, Any]) -> list[tuple[Any, Any]]:
        return [(start["offsets"], end["offsets"])]

    def out_of_flow(self, *plans: dict[str, Any]) -> set[str]:
        return set()  # the flow's topics are those of the plans (tests/unit/test_query.py: others)

    def close(self) -> None:
        pass


class _Runner:
    def __init__(self) -> None:
        self.flow = type("F", (), {"name": "a->b"})()
        self.job_group = "test group"
        self.batches: list[tuple[int, Any]] = []

    def __call__(self, ranges: Any, batch: int, phases: Any = None) -> None:
        self.batches.append((batch, ranges))


def _query(spark: Any, location: str, initial: dict[str, Any], frozen: dict[str, Any]) -> _Runner:
    from srm.replication.run_loop import RunLoop

    runner = _Runner()
    planner: Any = _Planner(initial, frozen)  # the query only calls what this one has
    query = RunLoop(spark, planner, runner, PlanLog(spark, location), "available-now")
    query.start()
    query.join(30)
    assert query.error is None
    return runner


def test_a_restart_runs_the_unfinished_batch_again_then_goes_on(spark: Any, tmp_path: Path) -> None:
    location = str(tmp_path / "cp")
    # a new query whose source holds nothing new still runs a first batch (commits first positions)
    assert _query(spark, location, START, START).batches == [(0, [(START["offsets"], START["offsets"])])]
    # batch 1 planned, the job killed before it finished: the restart runs it again with its plan
    PlanLog(spark, location).planned(1, START, END)
    later = {**END, "offsets": {"t": {"0": 12}}}
    runner = _query(spark, location, START, later)
    assert runner.batches == [
        (1, [(START["offsets"], END["offsets"])]),
        (2, [(END["offsets"], later["offsets"])]),
    ]
    last = PlanLog(spark, location).last()
    assert last is not None and (last.batch, last.done) == (2, True)
