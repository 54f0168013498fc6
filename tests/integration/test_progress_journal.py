"""Reading the progress of a flow whose progress records are journaled, on a real target.

Continuous mode writes a partition's progress record only every few seconds; the history records
of the transactions in between hold the position (srm.replication.progress). These records are
written here by hand, in transactions, to pin what the reader makes of each case; the copier
writing them is covered by the continuous-mode and fault tests, which count duplicates.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm import clients
from srm.config import SrmConfig
from srm.internal_topics import ensure_internal_topic, flow_internal_topics, history_topic_name, progress_topic_name
from srm.records import OPENER_HEADERS, OffsetRunsRecord, ProgressRecord
from srm.replication.progress import Progress, read_flow_progress
from srm.topics import broker_count
from tests.replication import make_env

pytestmark = pytest.mark.integration


def test_journaled_progress_is_taken_from_the_latest_committed_history_record(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("journal")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    flow = env.flow()
    for internal in flow_internal_topics(flow):
        admin = clients.admin_client(env.config.cluster(internal.cluster))
        ensure_internal_topic(admin, internal, broker_count(admin))
    history, progress = history_topic_name(flow), progress_topic_name(flow)
    acked: list[int] = []  # history offsets, as the copier learns them: from acknowledgements
    producer = clients.producer(
        env.east,
        **{"transactional.id": unique("journal-writer"), "on_delivery": lambda _, m: acked.append(m.offset())},
    )
    producer.init_transactions(30)

    def transaction(*records: tuple[str, Any, list[Any] | None], commit: bool = True) -> None:
        producer.begin_transaction()
        for name, record, headers in records:
            producer.produce(name, headers=headers, **record.as_produce_kwargs())
        producer.flush(30)
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)

    def runs(partition: int, next_offset: int) -> tuple[str, Any, None]:
        return history, OffsetRunsRecord(topic, partition, "id", next_offset, ((next_offset - 1, 0, 1),)), None

    def position(partition: int, next_offset: int, history_from: int = -1) -> tuple[str, Any, None]:
        return progress, ProgressRecord(topic, partition, "id", next_offset, history_from), None

    transaction(runs(2, 99))  # before partition 2's journaled record: not its position
    mark = acked[-1] + 1
    transaction(position(0, 10, mark), runs(0, 10), position(1, 5), position(2, 40, mark))
    transaction(runs(0, 20), runs(1, 7))  # partition 1's latest progress is plain: the last word
    transaction(runs(0, 30), commit=False)  # aborted: never the position
    opener = OffsetRunsRecord(topic, 0, "id", 25, ())
    transaction((history, opener, OPENER_HEADERS))  # only opens a transaction: not a position

    found = read_flow_progress(env.east, flow, [(topic, p) for p in range(4)])
    assert found == {
        (topic, 0): Progress(20, "id", journaled=True),
        (topic, 1): Progress(5, "id"),
        (topic, 2): Progress(40, "id", journaled=True),
    }
