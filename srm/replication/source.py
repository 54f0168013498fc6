"""The Spark streaming source ``srm-kafka``: plans offset ranges (leases in continuous mode); it
never reads a record.

Spark calls ``initialOffset``/``latestOffset``/``partitions`` in a Python process of its own
on the driver and checkpoints the offsets it returns; ``read`` runs in a task and turns the
planned ranges of a micro-batch into rows (one Spark partition for all of them, so planning
costs one small task however many Kafka partitions there are). The copy itself is the job that
``foreachBatch`` runs over these rows. Spark's checkpoint is only a cache of the plan: progress
lives on the target, so a deleted checkpoint restarts from the target's progress.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import astuple, fields
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadLimit, SupportsTriggerAvailableNow

from srm.replication.job import CopyRange

SOURCE_NAME = "srm-kafka"
SCHEMA = "topic string, partition int, start long, end long, topic_id string, target_topic string, initial boolean"


class RangesPartition(InputPartition):
    def __init__(self, ranges: list[tuple[Any, ...]]) -> None:
        super().__init__(len(ranges))
        self.ranges = ranges


class PlanReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, options: dict[str, str]) -> None:
        # Spark pickles the reader to the process that plans; Kafka clients are made there, lazily.
        self.options = options
        self._planner: Any = None
        self.frozen: dict[str, Any] | None = None  # available-now: the ends taken when the run starts

    @property
    def planner(self) -> Any:
        if self._planner is None:
            from srm.replication.planner import Planner

            options = self.options
            self._planner = Planner(options["config"], options["source"], options["target"], options.get("mode", ""))
        return self._planner

    def initialOffset(self) -> dict[str, Any]:
        initial: dict[str, Any] = self.planner.initial()
        return initial

    def prepareForTriggerAvailableNow(self) -> None:
        ends, ids = self.planner.snapshot()
        from srm.replication import offsets

        self.frozen = offsets.build(ends, ids)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        if self.frozen is None:
            latest: dict[str, Any] = self.planner.latest(start)
            return latest
        return self._frozen_after(start)

    def _frozen_after(self, start: dict[str, Any]) -> dict[str, Any]:
        """Available-now: never past the ends taken at the start; new partitions from earliest."""
        from srm.replication import offsets
        from srm.topics import list_offsets

        assert self.frozen is not None
        ends = offsets.positions(self.frozen)
        known = offsets.positions(start)
        new = [tp for tp in ends if tp not in known]
        initial = list_offsets(self.planner.source_admin, new, "earliest") if new else {}
        end = offsets.build(ends, self.frozen["ids"], initial)
        return start if offsets.same(start, end) and not new else end

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        ranges = self.planner.ranges(start, end)
        return [RangesPartition([astuple(r) for r in ranges])] if ranges else []

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        assert isinstance(partition, RangesPartition)
        yield from partition.ranges

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: progress was committed on the target with the data."""


class PlanSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return PlanReader(dict(self.options))


def range_from_row(row: Any) -> CopyRange:
    return CopyRange(**{f.name: row[f.name] for f in fields(CopyRange)})
