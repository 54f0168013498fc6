"""The transaction coordinator's log, ``__transaction_state``, read as any client can read it: which
partitions each transactional id's transactions touched and how each one ended.

A coordinator writes a transaction's outcome to its log first (PrepareCommit or PrepareAbort, with
every partition the transaction touched), then a marker to each of those partitions, then
CompleteCommit or CompleteAbort. One that finds a partition without a leader while it writes the
markers takes the partition for deleted and skips its marker ("likely deleted already" in the
broker's log): the transaction stays open on that partition and holds its last stable offset, and
every read_committed reader with it, until the same producer ends another transaction there. The
log still says which outcome the skipped marker carried; :func:`outcomes` reads it, and
:func:`end_hanging` has the same transactional id end a transaction over the same partitions with
that outcome and no record: its markers end the one left open too.

The record formats are Kafka's ``TransactionLogKey`` (version 0) and ``TransactionLogValue``
(versions 0 and 1, the first flexible one).
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any

from srm.config.model import Cluster
from srm.errors import RecordFormatError, SrmError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets, read_to_end
from srm.kafka.topics import partition_counts
from srm.mm2.wire import WireReader

log = logging.getLogger(__name__)
TXN_LOG = "__transaction_state"
END_TIMEOUT_MS = 60_000  # each step of ending a transaction left open (kafka-python's waits)
SKEW_MS = 5_000  # between a producer's clock and its coordinator's


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


def end_hanging(
    cluster: Cluster, admin: Any, consumer: Any, partition: tuple[str, int], prefix: str, *, spare: Collection[str] = ()
) -> list[Outcome]:
    """End the transactions left open on ``partition`` by producers of ``prefix`` whose coordinator
    completed them without writing their marker there: each one's transactional id ends a
    transaction over the partitions of the one left open, committed or aborted as its coordinator
    decided that one, and writes no record. ``spare``: ids of live producers, not fenced (their
    next transaction there ends it). Returns the transactions ended; none when the partition's last
    stable offset is at its end, or when a transaction its coordinator still tracks holds it.

    The log is read whole (the ids of a prefix may be in any of its partitions): a read held for
    seconds calls this, not a copy's every step."""
    stable = list_offsets(admin, [partition], "latest")[partition]
    end = list_offsets(admin, [partition], "latest", read_committed=False)[partition]
    if stable >= end:
        return []
    entries = read_log(consumer, admin, prefix)
    decided = outcomes(entries, partition)
    # The record the partition is held at came with the transaction left open: its producer wrote it
    # between that transaction's start and its coordinator's decision.
    written = _timestamp_at(cluster, partition, stable)
    if written is None:
        return []
    held = [
        outcome
        for name, outcome in decided.items()
        if name not in spare and outcome.started_ms - SKEW_MS <= written <= outcome.decided_ms + SKEW_MS
    ]
    for outcome in held:
        _end_one(cluster, outcome)
    return held


def end_left_open(
    cluster: Cluster,
    admin: Any,
    consumer: Any,
    partitions: Collection[tuple[str, int]],
    *,
    ids: Collection[str],
    prefix: str,
) -> list[Outcome]:
    """End the transactions the producers of ``ids``, all fenced, left open on any of ``partitions``:
    their coordinator completed them without writing a marker there. A fenced producer never writes
    again, and a later epoch's producers are other producers, so nothing else ends them. Each
    partition whose last stable offset is held by one of those ids' producers (the partition's own
    answer, DescribeProducers) is ended as its coordinator decided (:func:`_end_one`). The ids'
    partitions of the coordinator's log are read only when one of ``partitions`` is held. Returns
    the transactions ended."""
    held = held_partitions(admin, partitions)
    if not held:
        return []
    entries = read_log(consumer, admin, prefix, ids)
    ended, unknown = left_open(entries, holders(cluster, held))
    for tp, producer_id in unknown.items():
        log.warning(
            "%s[%d] on %s: held at offset %d by a transaction of %r (producer id %d) whose outcome its "
            "coordinator's log no longer holds; `kafka-transactions.sh --bootstrap-server %s find-hanging` shows it",
            *(*tp, cluster.alias, held[tp], ids_of(entries).get(producer_id), producer_id, cluster.describe()),
        )
    for outcome in ended:
        _end_one(cluster, outcome)
    return ended


def held_partitions(admin: Any, partitions: Collection[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """The last stable offset of each of ``partitions`` that is held below the partition's end."""
    if not partitions:
        return {}
    stable = list_offsets(admin, sorted(partitions), "latest", gone_ok=True)
    end = list_offsets(admin, sorted(stable), "latest", read_committed=False, gone_ok=True)
    return {tp: offset for tp, offset in stable.items() if offset < end.get(tp, offset)}


def left_open(
    entries: Iterable[TxnLogEntry], holding: dict[tuple[str, int], int]
) -> tuple[list[Outcome], dict[tuple[str, int], int]]:
    """Which decided transactions of the ids of ``entries`` (their log entries, in log order) hold
    partitions (``holding``: the producer id each partition is held by), each once however many
    partitions it holds; and the partitions held by one of those ids' producers without a decided
    transaction there in the log (compacted away)."""
    entries = list(entries)
    ours = ids_of(entries)
    found: dict[tuple[str, int], Outcome] = {}  # by (id, decided): one end covers all its partitions
    unknown: dict[tuple[str, int], int] = {}
    for tp, producer_id in sorted(holding.items()):
        held_by = [o for o in outcomes(entries, tp).values() if o.producer_id == producer_id]
        if not held_by and producer_id in ours:
            unknown[tp] = producer_id
        for outcome in held_by:
            found.setdefault((outcome.transactional_id, outcome.decided_ms), outcome)
    return list(found.values()), unknown


def ids_of(entries: Iterable[TxnLogEntry]) -> dict[int, str]:
    """The transactional id of each producer id in ``entries``."""
    return {entry.producer_id: entry.transactional_id for entry in entries}


def holders(cluster: Cluster, held: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """The producer id of the transaction each partition's last stable offset (``held``'s values) is
    held at, as the partition's leader answers DescribeProducers; a partition none holds any more
    is left out. SrmError when the leaders cannot be asked."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError
    from kafka.structs import TopicPartition

    where = f"{cluster.alias} ({cluster.describe()})"
    admin = None
    try:
        admin = KafkaAdminClient(request_timeout_ms=END_TIMEOUT_MS // 2, **protocol_settings(cluster))
        states = admin.describe_producers([TopicPartition(*tp) for tp in held])
    except KafkaError as exc:
        raise SrmError(
            f"cannot describe the producers of partitions held on {where}: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        if admin is not None:
            admin.close()
    found: dict[tuple[str, int], int] = {}
    for tp, state in states.items():
        at = held[(tp.topic, tp.partition)]
        for producer in state.active_producers:
            if producer.current_transaction_start_offset == at:
                found[(tp.topic, tp.partition)] = producer.producer_id
    return found


def _timestamp_at(cluster: Cluster, partition: tuple[str, int], offset: int) -> int | None:
    """The timestamp of the record at ``offset`` (read uncommitted), None if none comes."""
    from confluent_kafka import TopicPartition

    consumer = clients.consumer(cluster, "__srm.hanging", **{"isolation.level": "read_uncommitted"})
    try:
        consumer.assign([TopicPartition(*partition, offset)])
        message = consumer.poll(10.0)
        if message is None or message.error() is not None or message.offset() != offset:
            return None
        return int(message.timestamp()[1])
    finally:
        consumer.close()


def _end_one(cluster: Cluster, outcome: Outcome) -> None:
    """The same transactional id adds the partitions to a transaction and ends it as decided, with no
    record: kafka-python's producer adds partitions on their own (AddPartitionsToTxn), which
    librdkafka does only with a record."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError, KafkaTimeoutError
    from kafka.structs import TopicPartition

    decided = datetime.fromtimestamp(outcome.decided_ms / 1000, UTC).isoformat(timespec="seconds")
    named = ", ".join(f"{topic}[{number}]" for topic, number in sorted(outcome.partitions))
    where = f"{named} on {cluster.alias}"
    settings = protocol_settings(cluster)
    producer = None
    try:
        producer = KafkaProducer(transactional_id=outcome.transactional_id, max_block_ms=END_TIMEOUT_MS, **settings)
        producer.init_transactions()
        producer.begin_transaction()
        manager = producer._transaction_manager
        partitions = [TopicPartition(topic, number) for topic, number in sorted(outcome.partitions)]
        for tp in partitions:
            manager.maybe_add_partition_to_transaction(tp)
        producer._sender.wakeup()  # added now: an abort would drop partitions not added yet
        deadline = time.monotonic() + END_TIMEOUT_MS / 1000
        while not all(manager.is_partition_added(tp) for tp in partitions):
            if manager.has_error() or time.monotonic() > deadline:
                raise manager.last_error or KafkaTimeoutError(f"not added within {END_TIMEOUT_MS / 1000:.0f} s")
            time.sleep(0.01)
        # producer.commit_transaction() waits without a time-out: its manager's result, with one
        result = manager.begin_commit() if outcome.result == "commit" else manager.begin_abort()
        producer._sender.wakeup()
        if not result.wait(timeout_ms=END_TIMEOUT_MS):
            raise KafkaTimeoutError(f"not ended within {END_TIMEOUT_MS / 1000:.0f} s")
    except KafkaError as exc:
        raise SrmError(
            f"cannot end the transaction of {outcome.transactional_id!r} (producer id {outcome.producer_id}) left "
            f"open on {where}: {type(exc).__name__}: {exc}"
        ) from None
    finally:
        if producer is not None:
            producer.close(timeout=5)
    log.warning(
        "%s: ended the transaction of %r (producer id %d) left open there: its coordinator decided %s at %s but "
        "wrote no marker to them (Kafka skips the markers of a partition it finds without a leader)",
        *(where, outcome.transactional_id, outcome.producer_id, outcome.result, decided),
    )


# librdkafka's settings of a connection and their kafka-python names; nothing else reaches it.
PROTOCOL_SETTINGS = {
    "bootstrap.servers": "bootstrap_servers",
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.mechanisms": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
}
# Settings of how librdkafka behaves, not of how it connects: left out.
CONNECTION_PREFIXES = ("security.", "sasl.", "ssl.")


def protocol_settings(cluster: Cluster) -> dict[str, Any]:
    """The cluster's connection settings for kafka-python's clients; SrmError naming a security
    setting it has no equivalent for."""
    settings = clients.client_settings(cluster, "producer")
    out: dict[str, Any] = {"bootstrap_servers": str(settings["bootstrap.servers"]).split(",")}
    for key, value in settings.items():
        if key == "bootstrap.servers":
            continue
        if key in PROTOCOL_SETTINGS:
            out[PROTOCOL_SETTINGS[key]] = str(value).upper() if key == "security.protocol" else value
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = str(value).lower() == "https"
        elif key.startswith(CONNECTION_PREFIXES):
            raise SrmError(
                f"cluster {cluster.alias}: {key} has no equivalent in the client that ends transactions Kafka "
                "left open (kafka-python); end them with kafka-transactions.sh"
            )
    return out
