"""The Spark as-of join gives exactly what the pure translation gives, for every position."""

from __future__ import annotations

import random
from typing import Any

import pytest

from srm.offsets.asof import translate_frame
from srm.offsets.translate import to_source, to_target
from tests.unit.test_translate import simulate

pytestmark = pytest.mark.integration


def test_asof_join_matches_pure_translation(spark: Any) -> None:
    runs_rows, offset_rows, back_rows, ends_rows, expected_fwd, expected_back = [], [], [], [], {}, {}
    for partition in range(12):
        rng = random.Random(100 + partition)
        source, target, history = simulate(rng)
        runs_rows += [("t", partition, r.source_first, r.target_first, r.length) for r in history.runs]
        ends_rows.append(("t", partition, history.next_offset))
        for upstream in range(0, source[-1] + 3, 3):
            group = f"g{upstream % 5}"
            offset_rows.append((group, "t", partition, upstream))
            expected_fwd[(group, partition, upstream)] = to_target(history, upstream)
        for downstream in range(0, target[-1] + 3, 2):
            back_rows.append(("h", "t", partition, downstream))
            expected_back[("h", partition, downstream)] = to_source(history, downstream)
    offset_rows.append(("g0", "t", 99, 5))  # a partition without runs: no translation
    runs = spark.createDataFrame(
        runs_rows, "topic string, partition int, source_first long, target_first long, length long"
    )
    schema = "group string, topic string, partition int, position long"
    forward = translate_frame(spark.createDataFrame(offset_rows, schema), runs).collect()
    assert {(r["group"], r["partition"], r["position"]): r["translated"] for r in forward} == expected_fwd
    ends = spark.createDataFrame(ends_rows, "topic string, partition int, next_offset long")
    backward = translate_frame(spark.createDataFrame(back_rows, schema), runs, "backward", ends).collect()
    assert {(r["group"], r["partition"], r["position"]): r["translated"] for r in backward} == expected_back
