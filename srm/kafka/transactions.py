"""The transaction coordinator's log, ``__transaction_state``, read as any client can read it: which
partitions each transactional id's transactions touched and how each one ended.

A coordinator writes a transaction's outcome to its log first (PrepareCommit or PrepareAbort, with
every partition the transaction touched), then a marker to each of those partitions, then
CompleteCommit or CompleteAbort. One that finds a partition without a leader while it writes the
markers takes the partition for deleted and skips its marker ("likely deleted already" in the
broker's log): the transaction stays open on that partition and holds its last stable offset, and
every read_committed reader with it, until the same producer ends another transaction there. The
log still says which outcome the skipped marker carried; :func:`outcomes` reads it, and
:mod:`srm.kafka.hanging` ends such a transaction with it.

The record formats are Kafka's ``TransactionLogKey`` (version 0) and ``TransactionLogValue``
(versions 0 and 1, the first flexible one).
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from srm.errors import RecordFormatError
from srm.kafka.partitions import read_to_end
from srm.kafka.topics import partition_counts
from srm.mm2.wire import WireReader

log = logging.getLogger(__name__)
TXN_LOG = "__transaction_state"


class TxnStatus(IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7


PREPARED = {TxnStatus.PREPARE_COMMIT: "commit", TxnStatus.PREPARE_ABORT: "abort"}
COMPLETED = {TxnStatus.COMPLETE_COMMIT, TxnStatus.COMPLETE_ABORT}


@dataclass(frozen=True)
class TxnLogEntry:
    """One state of one transactional id's transaction, as its coordinator logged it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    status: TxnStatus
    partitions: frozenset[tuple[str, int]]
    updated_ms: int
    started_ms: int


@dataclass(frozen=True)
class Outcome:
    """How the latest transaction of a transactional id that touched a partition ended."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    result: str  # "commit" or "abort"
    started_ms: int
    decided_ms: int
    partitions: frozenset[tuple[str, int]]


def coordinator_partition(transactional_id: str, partitions: int) -> int:
    """The partition of ``__transaction_state`` that holds ``transactional_id`` (of ``partitions``,
    ``transaction.state.log.num.partitions``): Kafka's ``Utils.abs(id.hashCode()) % partitions``."""
    code = 0
    encoded = transactional_id.encode("utf-16-be")  # Java's String.hashCode runs over UTF-16 units
    for (unit,) in struct.iter_unpack(">H", encoded):
        code = (31 * code + unit) & 0xFFFFFFFF
    return (code & 0x7FFFFFFF) % partitions


def decode(key: bytes | None, value: bytes | None) -> tuple[str, TxnLogEntry | None]:
    """(transactional id, its entry) of one record of the log; the entry is None for a tombstone
    (the id expired). RecordFormatError, saying what and where, for a record of another format."""
    try:
        reader = WireReader(key, f"{TXN_LOG} key")
        if (version := reader.int16("version")) != 0:
            raise ValueError(f"{TXN_LOG} key of version {version}: only version 0 is known")
        transactional_id = reader.string("transactional id")
        if value is None:
            return transactional_id, None
        return transactional_id, _entry(transactional_id, WireReader(value, f"{TXN_LOG} value of {transactional_id!r}"))
    except ValueError as exc:
        raise RecordFormatError(str(exc)) from None


def _entry(transactional_id: str, reader: WireReader) -> TxnLogEntry:
    version = reader.int16("version")
    if version not in (0, 1):
        raise ValueError(f"{TXN_LOG} value of version {version} for {transactional_id!r}: 0 and 1 are known")
    flexible = version >= 1  # compact strings and arrays, tagged fields
    producer_id, epoch = reader.int64("producer id"), reader.int16("producer epoch")
    reader.int32("transaction timeout")
    status = reader.int8("status")
    partitions: set[tuple[str, int]] = set()
    for _ in range(_length(reader, flexible, "partitions")):
        topic = reader.compact_string("topic") if flexible else reader.string("topic")
        partitions.update((topic, reader.int32("partition")) for _ in range(_length(reader, flexible, "partition ids")))
        if flexible:
            reader.skip_tagged_fields("partitions' tagged fields")
    updated, started = reader.int64("last update"), reader.int64("start")
    try:
        state = TxnStatus(status)
    except ValueError:
        raise ValueError(f"{TXN_LOG} value for {transactional_id!r}: unknown status {status}") from None
    return TxnLogEntry(transactional_id, producer_id, epoch, state, frozenset(partitions), updated, started)


def _length(reader: WireReader, flexible: bool, field: str) -> int:
    """An array's length; a null array (-1, or 0 when compact) is empty."""
    return max(0, reader.uvarint(field) - 1 if flexible else reader.int32(field))


def outcomes(entries: Iterable[TxnLogEntry], partition: tuple[str, int]) -> dict[str, Outcome]:
    """Per transactional id, how its latest transaction that touched ``partition`` was decided, from
    its entries in log order, once its coordinator has completed it (CompleteCommit or
    CompleteAbort logged: every marker it was going to write is written or skipped). An id whose
    latest such transaction is open or still being completed is left out, as is one that never
    touched the partition."""
    decided: dict[str, Outcome] = {}
    found: dict[str, Outcome] = {}
    for entry in entries:
        name = entry.transactional_id
        if entry.status in COMPLETED and name in decided:
            found[name] = decided.pop(name)
        if partition not in entry.partitions:
            continue
        found.pop(name, None)
        decided.pop(name, None)
        if (result := PREPARED.get(entry.status)) is not None:
            producer, times = (entry.producer_id, entry.producer_epoch), (entry.started_ms, entry.updated_ms)
            decided[name] = Outcome(name, *producer, result, *times, entry.partitions)
    return found


def read_log(consumer: Any, admin: Any, prefix: str, ids: Collection[str] | None = None) -> list[TxnLogEntry]:
    """The entries of the transactional ids that start with ``prefix``, each id's in log order (an id
    lives in one partition of the log). ``consumer``: a reader (:func:`srm.kafka.clients.reader`).
    ``ids``: only these ids' entries, read from their partitions of the log alone."""
    count = partition_counts(admin, include_internal=True).get(TXN_LOG)
    if not count:
        return []
    partitions = range(count) if ids is None else sorted({coordinator_partition(i, count) for i in ids})
    keys = None if ids is None else {i.encode() for i in ids}
    entries: list[TxnLogEntry] = []
    for message in read_to_end(consumer, TXN_LOG, partitions):
        raw = message.key()
        if raw is None or not raw[4:].startswith(prefix.encode()):  # version, length, then the id
            continue
        if keys is not None and raw[4:] not in keys:
            continue
        try:
            _, entry = decode(raw, message.value())
        except RecordFormatError as exc:
            log.warning("%s[%d] offset %d: %s", TXN_LOG, message.partition(), message.offset(), exc)
            continue
        if entry is not None:
            entries.append(entry)
    return entries
