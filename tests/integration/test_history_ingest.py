"""The sync history moves from its topic into the warehouse exactly once, in chunks, past aborted
transactions, and an ingest that is repeated appends nothing twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.mm2.records import OffsetRunsRecord
from srm.replication import history
from srm.replication.history import HistoryIngest
from srm.storage.warehouse import SYNC_HISTORY
from tests.replication import make_env

pytestmark = pytest.mark.integration


def write(producer: Any, topic: str, record: OffsetRunsRecord, *, commit: bool) -> None:
    producer.begin_transaction()
    producer.produce(topic, **record.as_produce_kwargs())
    producer.flush(30)  # in the log even when aborted
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_history_is_ingested_in_chunks_once(
    kafka: SrmConfig, tmp_path: Path, unique: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": ["orders"]}])
    topic = unique("history")
    admin = clients.admin_client(env.east)
    ensure_topic(admin, topic, 1)
    producer = clients.producer(env.east, **{"transactional.id": unique("history-writer")})
    producer.init_transactions(30)
    committed = []
    for txn in range(9):
        record = OffsetRunsRecord("orders", txn % 3, "id-1", 10 * txn + 10, ((10 * txn, 5 * txn, 10),))
        write(producer, topic, record, commit=txn not in (2, 5))  # two aborted transactions
        if txn not in (2, 5):
            committed.append((record.partition, 10 * txn, 5 * txn))
    monkeypatch.setattr(history, "CHUNK_RECORDS", 2)
    ingest = HistoryIngest(env.warehouse, env.flow(), env.east, topic, admin)
    try:
        # commit_transaction returns once the coordinator has decided; the commit marker that
        # moves the last stable offset is written after it, so the ingest waits for it, as the
        # flow's shutdown does (accounting.SETTLE_AT_SHUTDOWN_S)
        assert ingest.ingest(settle_s=30) == 7
        rows = sorted(env.warehouse.read(SYNC_HISTORY, flow=env.flow().name), key=lambda r: r["history_offset"])
        assert [(r["partition"], r["source_first"], r["target_first"]) for r in rows] == committed
        assert all(r["length"] == 10 and r["next_offset"] == r["source_first"] + 10 for r in rows)
        assert env.warehouse.version(SYNC_HISTORY, ingest.app_id) == 18  # 9 records + 9 markers
        from deltalake import DeltaTable

        appends = [c for c in DeltaTable(str(env.warehouse.path(SYNC_HISTORY))).history() if c["operation"] == "WRITE"]
        assert len(appends) == 4  # 7 records in chunks of 2

        assert ingest.ingest() == 0  # nothing new: nothing appended twice
        write(producer, topic, OffsetRunsRecord("orders", 0, "id-1", 100, ((90, 45, 10),)), commit=True)
        assert ingest.ingest(settle_s=30) == 1
        assert len(env.warehouse.read(SYNC_HISTORY, flow=env.flow().name)) == 8
    finally:
        ingest.close()
