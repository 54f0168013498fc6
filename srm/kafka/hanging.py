"""Transactions Kafka left open on a partition ("hanging", in Kafka's tooling), found and ended.

A coordinator that skipped a partition's marker (:mod:`srm.kafka.transactions`) leaves the
transaction open there for good. The same transactional id ends one more transaction over the same
partitions with the outcome its coordinator logged and no record: its markers end the one left open
too. kafka-python does it (its producer adds partitions on their own, librdkafka only with a
record), and asks a partition's leader which producer holds it (DescribeProducers).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from typing import Any

from srm.config.model import Cluster
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.kafka.transactions import Outcome, TxnLogEntry, outcomes, read_log

log = logging.getLogger(__name__)
END_TIMEOUT_MS = 60_000  # each step of ending a transaction left open (kafka-python's waits)


def end_hanging(
    cluster: Cluster, admin: Any, consumer: Any, partition: tuple[str, int], prefix: str, *, spare: Collection[str] = ()
) -> list[Outcome]:
    """End the transactions left open on ``partition`` by producers of ``prefix`` whose coordinator
    completed them without writing their marker there (:func:`end_held`). ``spare``: ids of live
    producers, not fenced (their next transaction there ends it). Returns the transactions ended;
    none when the partition's last stable offset is at its end, or when a transaction its
    coordinator still tracks holds it.

    The log is read whole (the ids of a prefix may be in any of its partitions): a read held for
    seconds calls this, not a copy's every step."""
    held = held_partitions(admin, [partition])
    if not held:
        return []
    spared = set(spare)
    entries = [e for e in read_log(consumer, admin, prefix) if e.transactional_id not in spared]
    return end_held(cluster, held, entries)


def end_left_open(
    cluster: Cluster,
    admin: Any,
    consumer: Any,
    partitions: Collection[tuple[str, int]],
    *,
    ids: Collection[str],
    prefix: str,
) -> list[Outcome]:
    """End the transactions the producers of ``ids``, all fenced, left open on any of ``partitions``
    (:func:`end_held`). A fenced producer never writes again, and a later epoch's producers are
    other producers, so nothing else ends them. The ids' partitions of the coordinator's log are
    read only when one of ``partitions`` is held. Returns the transactions ended."""
    held = held_partitions(admin, partitions)
    if not held:
        return []
    return end_held(cluster, held, read_log(consumer, admin, prefix, ids))


def end_held(cluster: Cluster, held: dict[tuple[str, int], int], entries: list[TxnLogEntry]) -> list[Outcome]:
    """End what the ids of ``entries`` (their log entries) left open on the ``held`` partitions
    (each one's last stable offset): each partition's leader says which producer holds it
    (DescribeProducers), and that producer's transaction, which its coordinator completed without
    writing the partition's marker, is ended as decided (:func:`_end_one`), once however many
    partitions it holds. A partition one of those producers holds without a decided transaction
    there in the log (compacted away) is named, not ended blindly."""
    ended, unknown = left_open(entries, holders(cluster, held))
    names = ids_of(entries)
    for tp, producer_id in unknown.items():
        log.warning(
            "%s[%d] on %s: held at offset %d by a transaction of %r (producer id %d) whose outcome its "
            "coordinator's log no longer holds; `kafka-transactions.sh --bootstrap-server %s find-hanging` shows it",
            *(*tp, cluster.alias, held[tp], names.get(producer_id), producer_id, cluster.describe()),
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
