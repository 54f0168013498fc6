"""librdkafka errors of the data path, turned into messages that say what to change."""

from __future__ import annotations

from typing import Any

from srm.config.model import Cluster
from srm.errors import RemoteTopicGoneError, ReplicationError
from srm.kafka.retry import TOPIC_GONE

FENCED = ("PRODUCER_FENCED", "_FENCED", "INVALID_PRODUCER_EPOCH")  # a newer producer of the id took over
KNOWN_WRITE_ERRORS = (
    *FENCED,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
    "GROUP_AUTHORIZATION_FAILED",
    "TOPIC_AUTHORIZATION_FAILED",
)
# A record's delivery report may say less than the transaction's error: a broker that refuses a
# timestamp reports INVALID_RECORD per record and INVALID_TIMESTAMP for the transaction.
TRANSACTION_SAYS_MORE = ("INVALID_RECORD",)
REFINED = (*KNOWN_WRITE_ERRORS, "INVALID_TIMESTAMP")


# A record's partition or topic is not on the target: the remote topic was deleted under the flow
# (librdkafka retries a topic missing from its metadata for topic.metadata.propagation.max.ms first).
GONE = TOPIC_GONE


def gone_error(error: Any) -> Any:
    """``error`` if it says the topic is gone, else UNKNOWN_TOPIC_OR_PART (the target says so)."""
    from confluent_kafka import KafkaError

    return error if code_name(error) in GONE else KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)


def kafka_error(exc: BaseException) -> Any:
    """The KafkaError a KafkaException carries (else the exception itself)."""
    return exc.args[0] if exc.args else exc


def code_name(error: Any) -> str:
    try:
        return str(error.name())
    except Exception:  # a KafkaError always has name(); be safe with foreign objects
        return str(error)


def write_error(
    error: Any,
    *,
    target_cluster: Cluster,
    target_topic: str,
    partition: int,
    source_cluster: Cluster,
    topic: str,
    offset: int,
    size: int,
    remote_prefix: str,
) -> ReplicationError:
    """Why a record could not be written to the target, and the setting (or ACL) to change.
    ``remote_prefix``: what the flow's policy puts before every remote topic ('' for identity)."""
    name = code_name(error)
    target, source = target_cluster.alias, source_cluster.alias
    principal = target_cluster.principal()
    where = f"topic {topic!r} partition {partition} offset {offset}"
    if name == "MSG_SIZE_TOO_LARGE":  # librdkafka's name of Kafka's RECORD_TOO_LARGE
        return ReplicationError(
            f"record too large for the target: {where} on {source} is {size} bytes and {target_topic!r} on {target} "
            f"refused it. Raise max.message.bytes of topic {target_topic!r} on {target} (or message.max.bytes of its "
            f"brokers), and clusters.{target}.producer.message.max.bytes for records over 1 MB. The transaction "
            "holding it was aborted: the target has everything before it that was committed, and a restart "
            "resumes from there."
        )
    if name == "TOPIC_AUTHORIZATION_FAILED":
        every = f" (LITERAL, or PREFIXED {remote_prefix!r} for every remote topic)" if remote_prefix else ""
        return ReplicationError(
            f"not authorized to write topic {target_topic!r} on {target} (copying {where}): {principal} needs "
            f"WRITE on TOPIC {target_topic!r}{every}"
        )
    if name in ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"):
        return _id_or_group_denied(name, principal, source, target)
    if name in GONE:
        return RemoteTopicGoneError(
            f"remote topic {target_topic!r} partition {partition} is gone from {target} (deleted while the flow "
            f"copied {where} on {source} into it: {error.str() if hasattr(error, 'str') else error}). The run stops; "
            f"the next run finds it gone and, as the flow's on_data_loss says, stops (fail) or creates it again and "
            f"copies on from the committed progress (continue)"
        )
    if name in FENCED:
        return ReplicationError(
            f"another writer took over this slot on {target} while copying {where} (transaction fenced); "
            "this attempt stops and its open transaction is aborted, nothing is lost or duplicated"
        )
    detail = error.str() if hasattr(error, "str") else str(error)
    change = "the topic's or the brokers' configs"
    if name == "INVALID_TIMESTAMP":  # copies keep the source's CreateTime
        change = (
            f"message.timestamp.before.max.ms and message.timestamp.after.max.ms of {target_topic!r}, or the "
            "brokers' log.message.timestamp.*; copies keep the source records' timestamps"
        )
    return ReplicationError(
        f"cannot write {target_topic!r} partition {partition} on {target} ({where}): {detail} ({name}). Change what "
        f"refuses it on {target} ({change}), or take {topic!r} out of the flow (its topics list, or srm-control "
        f"topics --add-blacklist {topic} --source {source} --target {target}); the target has everything before it "
        "that was committed, and the next run resumes from there"
    )


def transaction_error(
    error: Any, source_cluster: Cluster, target_cluster: Cluster, doing: str, topics: list[str]
) -> ReplicationError:
    """A transactional call refused for lack of an ACL: the transaction's error does not say which of its
    topics (or ids) was refused, so the message names them and where the whole list is."""
    principal, name = target_cluster.principal(), code_name(error)
    listing = f"srm-control acls --source {source_cluster.alias} --target {target_cluster.alias}"
    detail = error.str() if hasattr(error, "str") else str(error)
    if name == "TOPIC_AUTHORIZATION_FAILED":
        names = ", ".join(repr(t) for t in topics)
        return ReplicationError(
            f"not authorized to write to {target_cluster.alias} while {doing} ({detail}): {principal} needs WRITE on "
            f"TOPIC {names}; `{listing}` lists every ACL the flow needs"
        )
    if name in ("TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"):
        return _id_or_group_denied(name, principal, source_cluster.alias, target_cluster.alias)
    return ReplicationError(f"cannot write to {target_cluster.alias} while {doing}: {detail}")


def _id_or_group_denied(name: str, principal: str, source: str, target: str) -> ReplicationError:
    if name == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED":
        return ReplicationError(
            f"not authorized to use the flow's transactional ids on {target}: {principal} needs WRITE on "
            f"TRANSACTIONAL_ID PREFIXED {transactional_prefix(source, target)!r} (taking over a flow and fencing "
            "use them even with exactly_once: false)"
        )
    return ReplicationError(
        f"not authorized to read replication progress on {target}: {principal} needs DESCRIBE on GROUP "
        "PREFIXED '__srm.'"
    )


def read_error(error: Any, *, source_cluster: Cluster, topic: str, partition: int, offset: int) -> ReplicationError:
    name = code_name(error)
    where = f"topic {topic!r} partition {partition} at offset {offset} on {source_cluster.alias}"
    if name == "TOPIC_AUTHORIZATION_FAILED":
        return ReplicationError(
            f"not authorized to read {where}: {source_cluster.principal()} needs READ on TOPIC {topic!r}"
        )
    if name == "GROUP_AUTHORIZATION_FAILED":
        return ReplicationError(
            f"not authorized to read {where}: {source_cluster.principal()} needs DESCRIBE on GROUP PREFIXED '__srm.'"
        )
    detail = error.str() if hasattr(error, "str") else str(error)
    return ReplicationError(f"cannot read {where}: {detail}")


def transactional_prefix(source: str, target: str) -> str:
    """The prefix of every transactional id of the flow source->target (owner, fencing, copy slots)."""
    return f"srm-replicate.{source}.{target}."


def is_fatal(error: Any) -> bool:
    fatal = getattr(error, "fatal", None)
    return bool(fatal()) if callable(fatal) else False


class ProducerFencedError(ReplicationError):
    """This slot's producer was fenced: the copier checks who owns the flow now."""


def call_error(
    exc: Exception, doing: str, slot: str, source: Cluster, target: Cluster, *, topics: list[str]
) -> ReplicationError:
    """What a failed transaction call of ``slot`` (writing ``topics`` to ``target``) means."""
    error = kafka_error(exc)
    name = code_name(error)
    if name in FENCED:
        return ProducerFencedError(
            f"{slot} on {target.alias} was fenced while {doing}: a newer writer of this "
            "slot or a newer owner of the flow took over; the open transaction is aborted"
        )
    if name in KNOWN_WRITE_ERRORS:
        return transaction_error(error, source, target, doing, topics)
    detail = error.str() if hasattr(error, "str") else str(error)
    return ReplicationError(f"{doing} on {target.alias} ({target.describe()}) failed for {slot}: {detail}")
