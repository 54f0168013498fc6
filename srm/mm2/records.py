"""MM2 wire formats: Heartbeat, Checkpoint and OffsetSync, byte for byte as MirrorMaker 2.

Kafka protocol types, big-endian: INT16/INT32/INT64; STRING = INT16 length then UTF-8 bytes (null
strings are not allowed). Fields follow in order with no names and no struct length; readers
ignore trailing bytes. The "version" of heartbeats and checkpoints is an INT16 prefix inside the
value bytes, not a record header. All three record types go to partition 0 of their topic.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Self

from srm.errors import RecordFormatError
from srm.mm2.wire import VERSION, WireReader

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_INT64_INT32 = struct.Struct(">qi")
_RUN = struct.Struct(">qqi")  # OffsetRunsRecord: upstream first, downstream first, length
_TWO_INT16 = struct.Struct(">hh")
_CHECKPOINT_HEAD = struct.Struct(">hqq")  # Checkpoint value: version, upstream, downstream offsets
_MAX_STRING = 32767


@dataclass(frozen=True)
class RecordLocation:
    """Where a record came from, for error messages."""

    topic: str
    partition: int
    offset: int

    def __str__(self) -> str:
        return f"topic {self.topic!r} partition {self.partition} offset {self.offset}"


def _string(v: str) -> bytes:
    data = v.encode("utf-8")
    if len(data) > _MAX_STRING:
        raise ValueError(f"string of {len(data)} bytes exceeds the Kafka STRING limit of {_MAX_STRING}")
    return _INT16.pack(len(data)) + data


class _Writer:
    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int16(self, v: int) -> _Writer:
        self._parts.append(_INT16.pack(v))
        return self

    def int32(self, v: int) -> _Writer:
        self._parts.append(_INT32.pack(v))
        return self

    def int64(self, v: int) -> _Writer:
        self._parts.append(_INT64.pack(v))
        return self

    def string(self, v: str) -> _Writer:
        self._parts.append(_string(v))
        return self

    def bytes(self) -> bytes:
        return b"".join(self._parts)


class KafkaMessage(Protocol):
    """The part of ``confluent_kafka.Message`` the decoders use."""

    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def headers(self) -> list[tuple[str, bytes | None]] | None: ...


class _Record:
    """Shared decode plumbing: turn any decoding problem into a RecordFormatError with context."""

    KIND: ClassVar[str]

    @classmethod
    def _parse(cls, key: WireReader, value: WireReader) -> Self:
        raise NotImplementedError

    @classmethod
    def _unpack(cls, key: bytes, value: bytes) -> Self | None:
        """A well-formed record decoded in one go (records read in bulk); None (or struct.error,
        ValueError) when the bytes do not fit: the field-by-field reader then names what is wrong."""
        return None

    @classmethod
    def _fast(cls, key: bytes | None, value: bytes | None) -> Self | None:
        try:
            return None if key is None or value is None else cls._unpack(key, value)
        except (struct.error, ValueError):
            return None

    @classmethod
    def decode(cls, key: bytes | None, value: bytes | None, where: RecordLocation | None = None) -> Self:
        """Decode one record; raise RecordFormatError naming the topic/partition/offset if known."""
        if (fast := cls._fast(key, value)) is not None:
            return fast
        try:
            return cls._parse(WireReader(key, f"{cls.KIND} key"), WireReader(value, f"{cls.KIND} value"))
        except (ValueError, struct.error) as exc:
            location = f" at {where}" if where else ""
            raise RecordFormatError(f"cannot decode {cls.KIND} record{location}: {exc}") from exc

    @classmethod
    def from_message(cls, message: KafkaMessage) -> Self:
        key, value = message.key(), message.value()
        if (fast := cls._fast(key, value)) is not None:
            return fast
        return cls.decode(
            key, value, RecordLocation(message.topic() or "?", message.partition() or 0, message.offset() or 0)
        )

    def key(self) -> bytes:
        raise NotImplementedError

    def value(self) -> bytes:
        raise NotImplementedError

    def as_produce_kwargs(self) -> dict[str, Any]:
        """Arguments for ``Producer.produce(topic, **kwargs)``: MM2 writes these to partition 0."""
        return {"key": self.key(), "value": self.value(), "partition": 0}


@dataclass(frozen=True)
class Heartbeat(_Record):
    """Written every ``emit.heartbeats.interval.seconds`` to ``heartbeats`` on the target."""

    KIND: ClassVar[str] = "heartbeat"
    source_cluster_alias: str
    target_cluster_alias: str
    timestamp: int  # milliseconds since the epoch

    def key(self) -> bytes:
        return _Writer().string(self.source_cluster_alias).string(self.target_cluster_alias).bytes()

    def value(self) -> bytes:
        return _Writer().int16(VERSION).int64(self.timestamp).bytes()

    @classmethod
    def _parse(cls, key: WireReader, value: WireReader) -> Self:
        source, target = key.string("sourceClusterAlias"), key.string("targetClusterAlias")
        value.version()
        return cls(source, target, value.int64("timestamp"))


@dataclass(frozen=True)
class Checkpoint(_Record):
    """A consumer group's committed source offset translated to the target.

    ``topic``/``partition`` are the downstream (renamed) ones; ``upstream_offset`` is the group's
    offset on the source, ``downstream_offset`` the position to resume from on the target.
    """

    KIND: ClassVar[str] = "checkpoint"
    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:  # written a pass's thousands at a time: packed in one go
        return _string(self.group) + _string(self.topic) + _INT32.pack(self.partition)

    def value(self) -> bytes:
        return _CHECKPOINT_HEAD.pack(VERSION, self.upstream_offset, self.downstream_offset) + _string(self.metadata)

    @classmethod
    def _parse(cls, key: WireReader, value: WireReader) -> Self:
        group, topic, partition = key.string("group"), key.string("topic"), key.int32("partition")
        value.version()
        upstream, downstream = value.int64("upstreamOffset"), value.int64("offset")
        return cls(group, topic, partition, upstream, downstream, value.string("metadata"))

    @classmethod
    def _unpack(cls, key: bytes, value: bytes) -> Self | None:
        (g,) = _INT16.unpack_from(key, 0)
        (t,) = _INT16.unpack_from(key, 2 + g)
        (partition,) = _INT32.unpack_from(key, 4 + g + t)  # raises when either string is cut short
        version, upstream, downstream = _CHECKPOINT_HEAD.unpack_from(value, 0)
        (m,) = _INT16.unpack_from(value, _CHECKPOINT_HEAD.size)
        if g < 0 or t < 0 or m < 0 or version != VERSION or len(value) < 20 + m:
            return None
        group, topic = key[2 : 2 + g].decode(), key[4 + g : 4 + g + t].decode()
        return cls(group, topic, partition, upstream, downstream, value[20 : 20 + m].decode())


class _PartitionKeyed(_Record):
    """Records keyed by an upstream partition: key STRING topic, INT32 partition."""

    topic: str  # fields of the dataclasses below
    partition: int

    def key(self) -> bytes:
        return _Writer().string(self.topic).int32(self.partition).bytes()

    @staticmethod
    def _partition(key: WireReader) -> tuple[str, int]:
        return key.string("topic"), key.int32("partition")


@dataclass(frozen=True)
class OffsetSync(_PartitionKeyed):
    """A pair (offset on the source, offset of the same record on the target) for one partition.

    ``topic``/``partition`` are the upstream ones. Unlike the other two, the value has no version.
    """

    KIND: ClassVar[str] = "offset-sync"
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def value(self) -> bytes:
        return _Writer().int64(self.upstream_offset).int64(self.downstream_offset).bytes()

    @classmethod
    def _parse(cls, key: WireReader, value: WireReader) -> Self:
        topic, partition = cls._partition(key)
        return cls(topic, partition, value.int64("upstreamOffset"), value.int64("offset"))


# Runs per OffsetRunsRecord (20 bytes each): 400 kB at most, far below a broker's 1 MB message limit.
RUNS_PER_RECORD = 20_000


# The header of a history record that only puts the history's partition into a transaction early
# (srm.replication.writer.TargetWriter._open_history): no runs, an already committed progress.
OPENER = "srm.opener"
OPENER_HEADERS = [(OPENER, b"1")]


def is_opener(message: KafkaMessage) -> bool:
    return any(name == OPENER for name, _ in message.headers() or ())


@dataclass(frozen=True)
class OffsetRunsRecord(_PartitionKeyed):
    """This project's exact sync history: per source partition per transaction one record, or several
    of at most RUNS_PER_RECORD runs each (a reader takes the union of a transaction's records).

    Written to ``srm-offset-syncs.<source>.internal`` on the target inside the same transaction as
    the data it describes, so the history can never disagree with what the target holds. Key:
    STRING upstream topic, INT32 partition. Value: INT16 version, STRING upstream topic id,
    INT64 next upstream offset to copy (the progress after this transaction), INT32 run count,
    then per run INT64 upstream first, INT64 downstream first, INT32 length.
    """

    KIND: ClassVar[str] = "offset-runs"
    topic: str
    partition: int
    topic_id: str
    next_offset: int
    runs: tuple[tuple[int, int, int], ...]

    @classmethod
    def batches(
        cls, topic: str, partition: int, topic_id: str, next_offset: int, runs: tuple[tuple[int, int, int], ...]
    ) -> list[Self]:
        """The records of one partition's transaction: ``runs`` split by RUNS_PER_RECORD (one record
        without runs when nothing was copied: the progress alone)."""
        return [
            cls(topic, partition, topic_id, next_offset, runs[start : start + RUNS_PER_RECORD])
            for start in range(0, max(len(runs), 1), RUNS_PER_RECORD)
        ]

    def value(self) -> bytes:
        w = _Writer().int16(VERSION).string(self.topic_id).int64(self.next_offset).int32(len(self.runs))
        for source_first, target_first, length in self.runs:
            w.int64(source_first).int64(target_first).int32(length)
        return w.bytes()

    @classmethod
    def _parse(cls, key: WireReader, value: WireReader) -> Self:
        topic, partition = cls._partition(key)
        value.version()
        topic_id, next_offset, count = value.string("topicId"), value.int64("nextOffset"), value.int32("runCount")
        if count < 0:
            raise ValueError(f"{cls.KIND} value: negative run count {count}")
        runs = tuple(
            (value.int64("sourceFirst"), value.int64("targetFirst"), value.int32("length")) for _ in range(count)
        )
        return cls(topic, partition, topic_id, next_offset, runs)

    @classmethod
    def _unpack(cls, key: bytes, value: bytes) -> Self | None:
        (t,) = _INT16.unpack_from(key, 0)
        (partition,) = _INT32.unpack_from(key, 2 + t)
        version, i = _TWO_INT16.unpack_from(value, 0)
        next_offset, count = _INT64_INT32.unpack_from(value, 4 + i)
        first = 16 + i
        end = first + _RUN.size * count
        if t < 0 or i < 0 or count < 0 or version != VERSION or len(value) < end:
            return None
        runs = tuple(_RUN.iter_unpack(value[first:end]))
        return cls(key[2 : 2 + t].decode(), partition, value[4 : 4 + i].decode(), next_offset, runs)


@dataclass(frozen=True)
class ProgressRecord(_PartitionKeyed):
    """Where the copy of one source partition stands: the next source offset to copy.

    Written to ``srm-offsets.<source>.internal`` on the target (compacted) inside the same
    transaction as the records it counts, like Kafka Connect's source offsets (MM2's
    ``mm2-offsets.<source>.internal``). Key: STRING upstream topic, INT32 partition. Value: INT16
    version, STRING upstream topic id (it changes when the topic is recreated), INT64 next offset,
    and optionally INT64 history offset (``history_from``, present when >= 0).

    A record with ``history_from`` is *journaled*: transactions after it may have moved the
    partition on with a history record only (:class:`OffsetRunsRecord`, which holds the same next
    offset), all of them at or after that offset of the history topic; the latest such history
    record is the progress (:mod:`srm.replication.progress`). A record without it is the last word
    until the next progress record.
    """

    KIND: ClassVar[str] = "progress"
    topic: str
    partition: int
    topic_id: str
    next_offset: int
    history_from: int = -1

    def value(self) -> bytes:
        w = _Writer().int16(VERSION).string(self.topic_id).int64(self.next_offset)
        return (w.int64(self.history_from) if self.history_from >= 0 else w).bytes()

    @classmethod
    def _parse(cls, key: WireReader, value: WireReader) -> Self:
        topic, partition = cls._partition(key)
        value.version()
        topic_id, next_offset = value.string("topicId"), value.int64("nextOffset")
        present = value.more()
        history_from = value.int64("historyFrom") if present else -1
        if present and history_from < 0:
            raise ValueError(f"{cls.KIND} value: negative history offset {history_from}")
        return cls(topic, partition, topic_id, next_offset, history_from)

    @property
    def journaled(self) -> bool:
        return self.history_from >= 0
