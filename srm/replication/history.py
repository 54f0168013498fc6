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

from srm.config.model import Cluster, Flow
from srm.errors import RecordFormatError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets, read_to_end
from srm.mm2.records import OffsetRunsRecord, is_opener
from srm.storage.warehouse import SYNC_HISTORY, Warehouse

log = logging.getLogger(__name__)
STALL_TIMEOUT_S = 60.0  # reading gives up when the topic yields nothing for this long
CHUNK_RECORDS = 50_000  # one warehouse append per chunk, so a long backlog is saved as it is read
# A chunk is appended in this order: a lookup of one partition then decodes its row groups only.
SORT_ORDER = ["topic", "partition", "source_first"]


def history_app_id(flow: Flow) -> str:
    """The Delta application id under which the ingest records how far it has read the topic."""
    return f"history:{flow.name}"


class HistoryIngest:
    def __init__(self, warehouse: Warehouse, flow: Flow, target: Cluster, topic: str, admin: Any) -> None:
        self.warehouse = warehouse
        self.flow = flow
        self.target = target
        self.topic = topic
        self.admin = admin
        self._consumer: Any = None
        self.app_id = history_app_id(flow)

    def ingest(self, settle_s: float = 0.0) -> int:
        """Append the history records committed since the last ingest, a chunk per warehouse commit;
        returns how many runs were appended. ``settle_s``: first wait up to that long until no
        transaction of the history topic is open (its last stable offset reaches its end)."""
        if settle_s:
            self._settle(settle_s)
        start = self.warehouse.version(SYNC_HISTORY, self.app_id) or 0
        end = self._end()
        appended = 0
        while start < end:
            reached, rows = self._read(start, end, CHUNK_RECORDS)
            self.warehouse.append(SYNC_HISTORY, rows, self.app_id, reached, sort_by=SORT_ORDER)
            appended += len(rows)
            start = reached
        return appended

    def tail(self) -> tuple[int, int, list[dict[str, Any]]]:
        """(start, end, rows) of the history committed to the topic but not yet in the warehouse."""
        start = self.warehouse.version(SYNC_HISTORY, self.app_id) or 0
        end = self._end()
        rows: list[dict[str, Any]] = []
        position = start
        while position < end:
            position, chunk = self._read(position, end, CHUNK_RECORDS)
            rows += chunk
        return start, end, rows

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _settle(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        partition = [(self.topic, 0)]
        while time.monotonic() < deadline:
            stable = list_offsets(self.admin, partition, "latest")[partition[0]]
            if stable >= list_offsets(self.admin, partition, "latest", read_committed=False)[partition[0]]:
                return
            time.sleep(0.05)

    def _end(self) -> int:
        return int(list_offsets(self.admin, [(self.topic, 0)], "latest")[(self.topic, 0)])

    def _read(self, start: int, end: int, limit: int) -> tuple[int, list[dict[str, Any]]]:
        """Rows of the records from ``start``, up to ``end`` or ``limit`` records; returns the offset
        the next read starts from with them (past transaction markers and aborted records)."""
        if self._consumer is None:
            self._consumer = clients.reader(self.target, "__srm.history-ingest")
        rows: list[dict[str, Any]] = []
        messages = read_to_end(self._consumer, self.topic, 0, STALL_TIMEOUT_S, start=start)
        for read, message in enumerate(messages, 1):
            if message.offset() >= end:
                break
            try:
                if not is_opener(message):  # it only put the partition into its transaction early
                    record = OffsetRunsRecord.from_message(message)
                    rows += self._rows(message.offset(), message.timestamp()[1], record)
            except RecordFormatError as exc:  # never stop the flow over one unreadable record
                log.error("skipping history record: %s", exc)
            if read >= limit and message.offset() + 1 < end:
                return message.offset() + 1, rows
        return end, rows

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
            # knows every position the flow ever committed.
            for source_first, target_first, length in record.runs or ((record.next_offset, -1, 0),)
        ]
