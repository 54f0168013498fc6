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
