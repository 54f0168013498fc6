"""The flow's plan log: what each micro-batch was planned to copy, kept in the checkpoint location.

Like Spark's checkpoint before it, only a cache: progress lives on the target, committed with the
data. It serves a restart: a batch planned but not finished runs again with the same plan (so a
partition first seen in it keeps the starting offset it was given), and batch numbers go on from
the last, which keeps the warehouse's appends idempotent (they are keyed by the plan log's id, the
metrics table's ``query_id``, and batch).
Deleting the folder gives a new id, and the next plan starts from the target's progress.

Files: ``metadata`` (``{"id": ...}``, the file Spark's checkpoints have, so a folder written by an
earlier version keeps its id), ``plans/<batch>`` (``{"start": ..., "end": ...}``) and
``done/<batch>``; the last ``KEEP`` batches are kept. Written through the Hadoop file system of
the Spark session, so every scheme Spark can write (``file:``, ``hdfs:``, ``s3a:``, ``abfss:``)
works as the location, as well as a local path.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any

from srm.replication.offsets import Offsets

KEEP = 10


@dataclass(frozen=True)
class PlannedBatch:
    batch: int
    start: Offsets
    end: Offsets
    done: bool


class PlanLog:
    def __init__(self, spark: Any, location: str) -> None:
        jvm = spark.sparkContext._jvm
        self._path = jvm.org.apache.hadoop.fs.Path
        self._utils = jvm.org.apache.commons.io.IOUtils
        self.root = self._path(location)
        self.fs = self.root.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        self.location = location
        self._id: str | None = None

    def query_id(self) -> str:
        """Stable across restarts, new when the folder is deleted."""
        if self._id is None:
            metadata = self._path(self.root, "metadata")
            try:
                self._id = str(json.loads(self._read(metadata))["id"]) if self.fs.exists(metadata) else None
            except (ValueError, KeyError, TypeError):
                self._id = None
            if self._id is None:
                self._id = str(uuid.uuid4())
                self._write(metadata, json.dumps({"id": self._id}))
        return self._id

    def last(self) -> PlannedBatch | None:
        """The last batch planned, whether it finished, or None for a new plan log."""
        batches = self._batches("plans")
        if not batches:
            return None
        batch = max(batches)
        try:
            plan = json.loads(self._read(self._path(self.root, f"plans/{batch}")))
            start, end = plan["start"], plan["end"]
        except (ValueError, KeyError, TypeError):  # a plan cut short by a crash: plan again
            return None
        return PlannedBatch(batch, start, end, self.fs.exists(self._path(self.root, f"done/{batch}")))

    def planned(self, batch: int, start: Offsets, end: Offsets) -> None:
        self._write(self._path(self.root, f"plans/{batch}"), json.dumps({"start": start, "end": end}))

    def done(self, batch: int) -> None:
        self._write(self._path(self.root, f"done/{batch}"), "")
        for folder in ("plans", "done"):
            for old in self._batches(folder):
                if old <= batch - KEEP:
                    self.fs.delete(self._path(self.root, f"{folder}/{old}"), False)

    def _batches(self, folder: str) -> list[int]:
        path = self._path(self.root, folder)
        if not self.fs.exists(path):
            return []
        names = [status.getPath().getName() for status in self.fs.listStatus(path)]
        return [int(name) for name in names if name.isdigit()]

    def _read(self, path: Any) -> str:
        stream = self.fs.open(path)
        try:
            return str(self._utils.toString(stream, "UTF-8"))
        finally:
            stream.close()

    def _write(self, path: Any, text: str) -> None:
        """Whole or not at all: written beside, then renamed over."""
        temporary = self._path(path.getParent(), f".{path.getName()}.tmp")
        stream = self.fs.create(temporary, True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()
        self.fs.delete(path, False)
        if not self.fs.rename(temporary, path):
            raise OSError(f"could not write {path.toString()} in the checkpoint location {self.location}")
