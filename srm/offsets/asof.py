"""Exact translation of many group offsets at once, as a Spark as-of join (see :mod:`.translate`).

Runs and group offsets of a partition are put in one stream ordered by position (a run sorts
before an offset at the same position); a window carries the last run at or before each offset
forward and the first run after it backward, so each offset meets exactly the two runs it needs.
That is a sort per partition, not a join of every group with every run: 1,000 groups on 100
partitions with thousands of runs each stay cheap.
"""

from __future__ import annotations

from typing import Any

RUN_FIELDS = ("source_first", "target_first", "length")


def translate_frame(offsets: Any, runs: Any, direction: str = "forward", ends: Any = None) -> Any:
    """``offsets`` (group, topic, partition, position, ...) -> the same rows with ``translated``.

    ``forward``: position is a source offset, the result a target offset; ``backward``: position
    is a target offset (the partition of the remote topic), the result a source offset, and
    ``ends`` (topic, partition, next_offset) gives where a partition's copy stands. Rows of
    partitions without any run are dropped: there is nothing to translate them with.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    here, there = ("source_first", "target_first") if direction == "forward" else ("target_first", "source_first")
    run = F.struct(F.col(here).alias("at"), F.col(there).alias("to"), F.col("length"))
    extra = [c for c in offsets.columns if c not in ("topic", "partition", "position")]
    runs_rows = runs.select(
        "topic",
        "partition",
        F.col(here).alias("position"),
        F.lit(0).alias("kind"),
        run.alias("run"),
        *[F.lit(None).cast(offsets.schema[c].dataType).alias(c) for c in extra],
    )
    offset_rows = offsets.select(
        "topic",
        "partition",
        "position",
        F.lit(1).alias("kind"),
        F.lit(None).cast(runs_rows.schema["run"].dataType).alias("run"),
        *extra,
    )
    ordered = Window.partitionBy("topic", "partition").orderBy("position", "kind")
    before = ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    after = ordered.rowsBetween(Window.currentRow, Window.unboundedFollowing)
    whole = Window.partitionBy("topic", "partition")
    joined = (
        runs_rows.unionByName(offset_rows)
        .withColumn("prev", F.last("run", ignorenulls=True).over(before))
        .withColumn("next", F.first("run", ignorenulls=True).over(after))
        .withColumn("runs_end", F.max(F.col("run.to") + F.col("run.length")).over(whole))
        .where((F.col("kind") == 1) & F.col("runs_end").isNotNull())
    )
    if direction == "backward":
        joined = joined.join(ends, ["topic", "partition"], "left")
        past_end = F.coalesce(F.col("next_offset"), F.col("runs_end"))
    else:
        past_end = F.col("runs_end")
    inside = F.col("prev").isNotNull() & (F.col("position") < F.col("prev.at") + F.col("prev.length"))
    translated = (
        F.when(inside, F.col("prev.to") + (F.col("position") - F.col("prev.at")))
        .when(F.col("next").isNotNull(), F.col("next.to"))
        .otherwise(past_end)
    )
    return joined.select("topic", "partition", "position", *extra, translated.alias("translated"))
