"""Moving the exact sync history from its Kafka topic on the target into the warehouse.

The history topic is written inside the copy transactions, so it is complete by construction;
this ingest reads it from the offset the warehouse recorded last time (the Delta application
transaction version of the table) up to its last stable offset, and appends one row per run.
Crashing anywhere just means the next ingest starts from the same offset again.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

from srm import clients
from srm.config.model import Cluster, Flow
from srm.errors import RecordFormatError
from srm.records import OffsetRunsRecord
from srm.topics import list_offsets
from srm.warehouse import SYNC_HISTORY, Warehouse

log = logging.getLogger(__name__)
READ_TIMEOUT_S = 60.0


class HistoryIngest:
    def __init__(self, warehouse: Warehouse, flow: Flow, target: Cluster, topic: str, admin: Any) -> None:
        self.warehouse = warehouse
        self.flow = flow
        self.target = target
        self.topic = topic
        self.admin = admin
        self._consumer: Any = None
        self.app_id = f"history:{flow.name}"

    def ingest(self) -> int:
        """Append the history records committed since the last ingest; returns how many were read."""
        start, end, rows = self.tail()
        if end <= start:
            return 0
        self.warehouse.append(SYNC_HISTORY, rows, self.app_id, end)
        return len(rows)

    def tail(self) -> tuple[int, int, list[dict[str, Any]]]:
        """(start, end, rows) of the history committed to the topic but not yet in the warehouse."""
        start = self.warehouse.version(SYNC_HISTORY, self.app_id) or 0
        end = list_offsets(self.admin, [(self.topic, 0)], "latest")[(self.topic, 0)]
        if end <= start:
            return start, end, []
        records = self._read(start, end)
        return start, end, [row for offset, ts, record in records for row in self._rows(offset, ts, record)]

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _read(self, start: int, end: int) -> list[tuple[int, int, OffsetRunsRecord]]:
        from confluent_kafka import TopicPartition

        if self._consumer is None:
            self._consumer = clients.consumer(self.target, "__srm.history-ingest", **{"enable.partition.eof": True})
        self._consumer.assign([TopicPartition(self.topic, 0, start)])
        out: list[tuple[int, int, OffsetRunsRecord]] = []
        deadline = time.monotonic() + READ_TIMEOUT_S
        while time.monotonic() < deadline:
            for message in self._consumer.consume(10_000, 0.05):
                error = message.error()
                if error is not None:
                    if error.name() == "_PARTITION_EOF" and message.offset() >= end:
                        return out
                    continue
                if message.offset() >= end:
                    return out
                try:
                    out.append((message.offset(), message.timestamp()[1], OffsetRunsRecord.from_message(message)))
                except RecordFormatError as exc:  # never stop the flow over one unreadable record
                    log.error("skipping history record: %s", exc)
                if message.offset() >= end - 1:
                    return out
        raise TimeoutError(
            f"reading {self.topic} from {start} to {end} on {self.target.alias} took over {READ_TIMEOUT_S:.0f} s"
        )

    def _rows(self, offset: int, timestamp: int, record: OffsetRunsRecord) -> list[dict[str, Any]]:
        committed = datetime.fromtimestamp(timestamp / 1000, UTC)
        return [
            {
                "flow": self.flow.name,
                "topic": record.topic,
                "partition": record.partition,
                "topic_id": record.topic_id,
                "source_first": source_first,
                "target_first": target_first,
                "length": length,
                "next_offset": record.next_offset,
                "history_offset": offset,
                "committed_at": committed,
            }
            # A transaction that moved only the progress (nothing copied: a new partition's start,
            # commit markers or aborted records skipped) keeps a row of length 0, so the history
            # knows every position the flow ever committed (see srm.offsets.history.recorded_progress).
            for source_first, target_first, length in record.runs or ((record.next_offset, -1, 0),)
        ]
