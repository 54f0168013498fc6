"""The copy loop of continuous mode driven step by step, on real brokers.

The resident copier's loop (srm.replication.resident) is timing-driven; here its steps are taken
by hand, so what one transaction holds is known exactly.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.internal_topics import history_topic_name, progress_topic_name
from srm.kafka.topics import ensure_topic
from srm.replication.clientcache import ClientCache
from srm.replication.job import CopyJob, Lease
from srm.replication.source_reader import SourceReader
from tests.helpers import produce
from tests.integration.test_progress_journal import flow_env
from tests.replication import sequenced

pytestmark = pytest.mark.integration


def reader_job(flow: Any, env: Any, lease: Lease | None = None) -> CopyJob:
    """A job of slot 0 without ranges, for a source reader alone (``lease``: continuous)."""
    return CopyJob(
        flow,
        env.west,
        env.east,
        0,
        (),
        history_topic_name(flow),
        progress_topic_name(flow),
        epoch=0,
        owners_run="test",
        owners_offset=0,
        lease=lease,
    )


class MetadataCalls:
    """A real consumer, its metadata requests noted (the topic asked for; None: all topics)."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.asked: list[str | None] = []

    def list_topics(self, topic: str | None = None, **kwargs: Any) -> Any:
        self.asked.append(topic)
        return self.consumer.list_topics(topic, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.consumer, name)


def test_the_reader_asks_for_the_metadata_of_the_topics_it_is_assigned_first(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """librdkafka fetches a partition whose leader it does not know only after a metadata refresh
    of its own: a copier's first fetch came 0.9-1.4 s late (docs/benchmarks/lab-notes.md, "Scale")."""
    topics = [unique(f"meta{i}") for i in range(14)]
    env, flow = flow_env(kafka, tmp_path, topics[0])
    admin = clients.admin_client(env.west)
    for topic in topics:
        ensure_topic(admin, topic, 1)
    for topic in (topics[0], topics[3], topics[13]):
        produce(env.west, topic, sequenced(1, 2))
    reader = SourceReader(reader_job(flow, env), ClientCache())
    spy = MetadataCalls(reader.consumer)
    reader.consumer = spy
    try:
        reader.assign((t, 0, 0) for t in topics[:3])
        assert spy.asked == topics[:3], "a few topics: one by one"
        reader.assign((t, 0, 0) for t in topics[3:])
        assert spy.asked == [*topics[:3], None], "many: one request for all topics"
        records: list[tuple[str, int]] = []
        deadline = time.monotonic() + 30
        while len(records) < 6:  # and the partitions' records come
            assert time.monotonic() < deadline, f"{len(records)} of 6 records read in 30 s"
            records += [(m.topic(), m.offset()) for m in reader.consume(1.0) if m.error() is None]
        assert sorted(records) == sorted((t, o) for t in (topics[0], topics[3], topics[13]) for o in (0, 1))
    finally:
        reader.close()


def test_a_continuous_reader_reads_new_partitions_on_a_fresh_consumer_from_where_the_others_stand(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    """A continuous copier's consumer waits for records as long as the broker holds its fetch, so
    new partitions go onto a fresh consumer (learn_ahead()'s) with the others, each from the offset
    the copy reads next; a partition paused stays paused until sought with resume."""
    a, b, c = (unique(f"fresh{n}") for n in "abc")
    env, flow = flow_env(kafka, tmp_path, a)
    admin = clients.admin_client(env.west)
    for topic in (a, b, c):
        ensure_topic(admin, topic, 1)
    produce(env.west, a, sequenced(1, 4))
    produce(env.west, c, sequenced(1, 2))
    at: dict[tuple[str, int], int] = {}  # where the copy reads next, as CopyLoop's states say
    reader = SourceReader(reader_job(flow, env, Lease(1, 60, 100)), ClientCache(), lambda: at)

    def read(count: int) -> list[tuple[str, int]]:
        got: list[tuple[str, int]] = []
        deadline = time.monotonic() + 30
        while len(got) < count:
            assert time.monotonic() < deadline, f"{len(got)} of {count} records read in 30 s: {got}"
            got += [(m.topic(), m.offset()) for m in reader.consume(0.5) if m.error() is None]
        return got

    try:
        reader.assign([(a, 0, 0), (c, 0, 0)])
        at.update({(a, 0): 4, (c, 0): 2})
        assert sorted(read(6)) == [*((a, o) for o in range(4)), (c, 0), (c, 1)]
        reader.pause((c, 0))
        produce(env.west, a, sequenced(1, 2))
        produce(env.west, b, sequenced(1, 3))
        produce(env.west, c, sequenced(1, 2))
        first = reader.consumer
        reader.learn_ahead()
        at[a, 0] = 2  # a read again from 2 (say, after an abort)
        reader.assign([(b, 0, 1)])
        assert reader.consumer is not first, "the new partition is read on a fresh consumer"
        with pytest.raises(RuntimeError):
            first.assignment()  # the old one is closed
        assert reader.assigned() == {(a, 0), (b, 0), (c, 0)}
        assert sorted(read(6)) == [*((a, o) for o in range(2, 6)), (b, 1), (b, 2)], "from the carried offsets"
        reader.seek((c, 0), 2, resume=True)
        assert read(2) == [(c, 2), (c, 3)], "the paused partition comes on resumed, from where it stood"
    finally:
        reader.close()
