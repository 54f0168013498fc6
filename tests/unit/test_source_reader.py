"""A continuous copier's source reader moves between consumers without a broker: onto one whose
fetch the broker holds longer once nothing came for a while, back at the first record, and onto a
fresh one whenever partitions are added, every partition from the offset its copy reads next."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition

from srm.replication import source_reader
from srm.replication.clientcache import ClientCache
from srm.replication.source_reader import (
    CONSUMER_SETTINGS,
    LINGER_FETCH_MIN_BYTES,
    QUIET_FETCH_WAIT_MS,
    SourceReader,
    consumer_settings,
    unknown_topics,
)
from tests.unit.test_writer import job

Key = tuple[str, int]


class Record:
    def __init__(self, topic: str, offset: int, error: Any = None) -> None:
        self._topic, self._offset, self._error = topic, offset, error

    def error(self) -> Any:
        return self._error


class Consumer:
    """A consumer as librdkafka's, without a broker: what it was built with, assigned and paused,
    and whether it was closed; ``waiting``: what its next consume() hands over."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.at: dict[Key, int] = {}
        self.paused: set[Key] = set()
        self.closed = False
        self.waiting: list[Record] = []

    def assign(self, tps: list[Any]) -> None:
        self.at = {(tp.topic, tp.partition): tp.offset for tp in tps}

    def incremental_assign(self, tps: list[Any]) -> None:
        self.at.update({(tp.topic, tp.partition): tp.offset for tp in tps})

    def assignment(self) -> list[Any]:
        return [TopicPartition(t, p) for t, p in self.at]

    def pause(self, tps: list[Any]) -> None:
        self.paused |= {(tp.topic, tp.partition) for tp in tps}

    def resume(self, tps: list[Any]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in tps}

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        return SimpleNamespace(topics={})

    def consume(self, count: int, timeout: float = 0) -> list[Record]:
        waiting, self.waiting = self.waiting, []
        return waiting

    def poll(self, timeout: float = 0) -> Any:
        return None

    def unassign(self) -> None:
        self.at = {}

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[Consumer]:
    """The consumers the reader builds, in order."""
    consumers: list[Consumer] = []

    def consumer(cluster: Any, group: str, **settings: Any) -> Consumer:
        consumers.append(Consumer(settings))
        return consumers[-1]

    monkeypatch.setattr(source_reader.clients, "consumer", consumer)
    monkeypatch.setattr(source_reader.clients, "settled", lambda client: client)  # no broker to learn of
    return consumers


def test_a_quiet_copier_reads_on_a_consumer_with_the_longer_hold_and_leaves_it_at_the_first_record(
    built: list[Consumer], monkeypatch: pytest.MonkeyPatch
) -> None:
    positions = {("a", 0): 7, ("b", 0): 3}
    reader = SourceReader(job(continuous=True), ClientCache(), lambda: positions)
    reader.assign([("a", 0, 5), ("b", 0, 3)])
    reader.pause(("b", 0))
    active = built[-1]
    assert active.settings["fetch.wait.max.ms"] == CONSUMER_SETTINGS["fetch.wait.max.ms"]

    monkeypatch.setattr(source_reader, "QUIET_AFTER_S", 0.0)
    active.waiting = [Record("a", 5), Record("a", 6)]
    assert len(reader.consume(0)) == 2
    assert reader.consumer is active, "records came: not quiet yet"
    reader.consume(0)  # nothing came (for QUIET_AFTER_S)
    quiet = built[-1]
    assert reader.quiet and reader.consumer is quiet and active.closed
    assert quiet.settings["fetch.wait.max.ms"] == QUIET_FETCH_WAIT_MS
    assert quiet.at == positions, "each partition from the offset its copy reads next"
    assert quiet.paused == {("b", 0)}, "a paused partition stays paused"
    quiet.waiting = [Record("a", 7, KafkaError(KafkaError._PARTITION_EOF))]
    reader.consume(0)
    reader.consume(0)
    assert reader.consumer is quiet, "an event is not a record: still quiet"

    positions[("a", 0)] = 8
    quiet.waiting = [Record("a", 7)]
    reader.consume(0)
    assert reader.consumer is quiet, "the record is handed over by the quiet consumer, without waiting"
    monkeypatch.setattr(source_reader, "QUIET_AFTER_S", 30.0)
    reader.consume(0)
    awake = built[-1]
    assert not reader.quiet and reader.consumer is awake and quiet.closed
    assert awake.settings["fetch.wait.max.ms"] == CONSUMER_SETTINGS["fetch.wait.max.ms"]
    assert awake.at == {("a", 0): 8, ("b", 0): 3}


def test_new_partitions_of_a_continuous_copier_are_read_on_a_fresh_consumer_with_the_others(
    built: list[Consumer],
) -> None:
    at = {("a", 0): 5}
    reader = SourceReader(job(continuous=True), ClientCache(), lambda: at)
    reader.assign([("a", 0, 5)])
    first = built[-1]
    at[("a", 0)] = 9  # copied up to 9 meanwhile
    reader.assign([("c", 1, 0)])
    assert built[-1] is not first and first.closed
    assert built[-1].at == {("a", 0): 9, ("c", 1): 0}


def test_an_available_now_reader_keeps_its_consumer_and_never_turns_quiet(
    built: list[Consumer], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(source_reader, "QUIET_AFTER_S", 0.0)
    reader = SourceReader(job(continuous=False), ClientCache())
    reader.assign([("a", 0, 5)])
    reader.assign([("c", 1, 0)])
    reader.consume(0)
    assert len(built) == 1 and built[0].at == {("a", 0): 5, ("c", 1): 0} and not reader.quiet


def test_the_topics_whose_metadata_a_consumer_lacks_for_an_assignment() -> None:
    assignment = [TopicPartition("a", 0, 0), TopicPartition("a", 3, 0), TopicPartition("b", 0, 0)]
    assert unknown_topics(assignment, {"a": 4, "b": 1}) == []
    assert unknown_topics(assignment, {"a": 2}) == ["a", "b"]


def test_a_lingering_copiers_fetch_waits_for_a_mib_or_a_tenth_of_its_linger(
    built: list[Consumer], monkeypatch: pytest.MonkeyPatch
) -> None:
    """With transaction.linger.ms the broker holds the copier's fetch until a MiB has come or a
    tenth of the linger has passed; without one, and on the quiet consumer, any record ends it."""
    from dataclasses import replace

    plain = job(continuous=True)
    lingering = replace(plain, lease=replace(plain.lease, transaction_linger_ms=100))
    reader = SourceReader(lingering, ClientCache(), lambda: {("a", 0): 0})
    reader.assign([("a", 0, 0)])
    active = built[-1]
    assert (active.settings["fetch.min.bytes"], active.settings["fetch.wait.max.ms"]) == (LINGER_FETCH_MIN_BYTES, 10)
    monkeypatch.setattr(source_reader, "QUIET_AFTER_S", 0.0)
    active.waiting = [Record("a", 0)]
    reader.consume(0)
    reader.consume(0)  # nothing came (for QUIET_AFTER_S): onto the quiet consumer
    quiet = built[-1]
    assert reader.quiet and quiet is not active
    assert quiet.settings.get("fetch.min.bytes", 1) == 1 and quiet.settings["fetch.wait.max.ms"] == QUIET_FETCH_WAIT_MS

    SourceReader(plain, ClientCache(), lambda: {})
    assert built[-1].settings == CONSUMER_SETTINGS, "no linger: every record ends the fetch"
    SourceReader(job(continuous=False), ClientCache(), lambda: {})
    assert built[-1].settings == CONSUMER_SETTINGS, "available-now"


def test_a_lingering_fetch_holds_at_most_kafkas_default() -> None:
    assert consumer_settings(5)["fetch.wait.max.ms"] == 1
    assert consumer_settings(1_000)["fetch.wait.max.ms"] == 100
    assert consumer_settings(20_000)["fetch.wait.max.ms"] == CONSUMER_SETTINGS["fetch.wait.max.ms"] == 500
    assert consumer_settings(0) == CONSUMER_SETTINGS
