"""Topic administration on one cluster: creation, configs, partitions, ids (offsets and reads: srm.kafka.partitions).

Every call resolves its futures, retries retriable errors (see :mod:`srm.kafka.retry`) and raises
SrmError naming the topic otherwise.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from srm.errors import ClusterUnreachableError, SrmError
from srm.kafka.clients import list_metadata
from srm.kafka.retry import TOPIC_GONE, needs, retrying
from srm.mm2.topic_configs import ConfigValue

log = logging.getLogger(__name__)

ADMIN_TIMEOUT_S = 30.0  # a metadata request on a healthy cluster takes milliseconds; allow for elections
BATCH = 500  # topics to one CreateTopics or DescribeConfigs request


def _in_batches(names: list[str], attempt: Callable[[list[str]], None]) -> None:
    """``attempt(batch)`` for every BATCH names. A batch that fails for good (not for a cluster that
    does not answer) is attempted again one name at a time, so that the failure names its topic."""
    for batch in (names[i : i + BATCH] for i in range(0, len(names), BATCH)):
        if len(batch) > 1:
            try:
                attempt(batch)
                continue
            except ClusterUnreachableError:
                raise
            except SrmError:
                pass
        for name in batch:
            attempt([name])


def _subject(names: list[str]) -> str:
    """What a batched call is about, in its error: the topic, when it is one."""
    return f"topic {names[0]!r}" if len(names) == 1 else f"{len(names)} topics"


def _needed(admin: Any, operation: str, names: list[str]) -> str | None:
    """The ACL a call on one topic needs (a batch that fails for good is retried topic by topic)."""
    return needs(admin, operation, f"TOPIC {names[0]!r}") if len(names) == 1 else None


def _resolve(futures: dict[Any, Any], skipped: tuple[str, ...] = ()) -> dict[Any, Any]:
    """Each future's result; the keys whose error is one of ``skipped`` (librdkafka's names) are
    left out instead of failing the call."""
    from concurrent.futures import TimeoutError as NoAnswer

    from confluent_kafka import KafkaError, KafkaException

    out = {}
    for key, future in futures.items():
        try:
            out[key] = future.result(timeout=ADMIN_TIMEOUT_S)
        except NoAnswer:  # a frozen cluster: librdkafka's own timeout has not fired yet; retried as it would be
            raise KafkaException(
                KafkaError(KafkaError._TIMED_OUT, f"no answer within {ADMIN_TIMEOUT_S:.0f} s")
            ) from None
        except KafkaException as exc:
            if not (exc.args and getattr(exc.args[0], "name", lambda: "")() in skipped):
                raise
    return out


def admin_request(
    request: Callable[[], dict[Any, Any]],
    what: str,
    admin: Any,
    needed: str | None,
    *,
    skipped: tuple[str, ...] = (),
) -> dict[Any, Any]:
    """``request()``'s futures resolved, retried as :func:`srm.kafka.retry.retrying` does; the keys
    whose error is one of ``skipped`` (e.g. TOPIC_GONE: a topic deleted meanwhile) are left out of
    the result rather than failing it."""
    return retrying(
        lambda: _resolve(request(), skipped),
        on_cluster(admin, what),
        needed=needed,
        refresh=lambda: list_metadata(admin, timeout_s=ADMIN_TIMEOUT_S),
        cluster=admin.srm_alias,
    )


def named(topics: set[str], *, quoted: bool = False, shown: int = 10) -> str:
    """The first ``shown`` of ``topics`` (sorted), and how many more: an error about 2,000 topics
    names ten."""
    names = [repr(t) if quoted else t for t in sorted(topics)]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def on_cluster(admin: Any, what: str) -> str:
    """``what`` followed by the cluster the admin client talks to, when known."""
    cluster = getattr(admin, "srm_cluster", None)
    return f"{what} on {cluster}" if cluster else what


@dataclass(frozen=True)
class NewTopicSpec:
    name: str
    partitions: int
    replication_factor: int = 1
    config: Mapping[str, str] = field(default_factory=dict)


def ensure_topic(
    admin: Any, name: str, partitions: int, replication_factor: int = 1, config: dict[str, str] | None = None
) -> bool:
    """Create ``name`` unless it exists; True if it was created. Other failures name the topic."""
    return bool(ensure_topics(admin, [NewTopicSpec(name, partitions, replication_factor, config or {})]))


def ensure_topics(admin: Any, topics: Sequence[NewTopicSpec]) -> set[str]:
    """Create each of ``topics`` that does not exist, BATCH topics to a CreateTopics request (the
    controller creates them together: 1,000 topics in one request instead of 1,000 round trips);
    the names of those created. A failure names its topic: a request that fails for good is sent
    again one topic at a time up to the topic that fails."""
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    created: set[str] = set()
    pending = {t.name: t for t in topics}

    def create(names: list[str]) -> None:
        requests = [
            NewTopic(n, num_partitions=t.partitions, replication_factor=t.replication_factor, config=dict(t.config))
            for n in names
            if (t := pending.get(n)) is not None
        ]
        if not requests:  # created by an earlier attempt of its batch
            return
        failure: KafkaException | None = None
        for name, future in admin.create_topics(requests, operation_timeout=ADMIN_TIMEOUT_S).items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    failure = failure or exc
                    continue
            else:
                created.add(name)
            del pending[name]  # created, or there already: not asked for again
        if failure is not None:
            raise failure

    def attempt(names: list[str]) -> None:
        retrying(
            lambda: create(names),
            on_cluster(admin, f"cannot create {_subject(names)}"),
            needed=_needed(admin, "CREATE", names),
            cluster=admin.srm_alias,
        )

    _in_batches(list(pending), attempt)
    return created


def cluster_metadata(admin: Any) -> Any:
    """The cluster's metadata (``.topics``: name -> partitions; ``.brokers``), in one request."""
    return retrying(
        lambda: list_metadata(admin, timeout_s=ADMIN_TIMEOUT_S),
        on_cluster(admin, "cannot list topics"),
        cluster=admin.srm_alias,
    )


def partition_counts(admin: Any, include_internal: bool = False) -> dict[str, int]:
    """Topic name -> partition count."""
    metadata = cluster_metadata(admin)
    return {
        name: len(topic.partitions)
        for name, topic in metadata.topics.items()
        if include_internal or not name.startswith("__")
    }


def describe_config_values(admin: Any, topic: str) -> list[ConfigValue]:
    """Every config of ``topic`` with where its value comes from."""
    return describe_configs_of(admin, [topic])[topic]


def describe_configs_of(admin: Any, topics: Sequence[str]) -> dict[str, list[ConfigValue]]:
    """Every config of each of ``topics`` with where its value comes from, BATCH topics to a request."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType  # type: ignore[attr-defined]

    found: dict[str, list[ConfigValue]] = {}

    def attempt(names: list[str]) -> None:
        resources = [ConfigResource(ResourceType.TOPIC, n) for n in names]
        entries = admin_request(
            lambda: admin.describe_configs(resources),
            f"cannot read the configs of {_subject(names)}",
            admin,
            _needed(admin, "DESCRIBE_CONFIGS", names),
        )
        for resource, values in entries.items():
            found[resource.name] = [
                ConfigValue(e.name, e.value, ConfigSource(e.source).name, bool(e.is_read_only), bool(e.is_sensitive))
                for e in values.values()
            ]

    _in_batches(list(dict.fromkeys(topics)), attempt)
    return found


def describe_topic_configs(admin: Any, topic: str) -> dict[str, str | None]:
    return {c.name: c.value for c in describe_config_values(admin, topic)}


def topic_replication_factors(admin: Any, topics: list[str]) -> dict[str, int]:
    metadata = cluster_metadata(admin).topics
    return {t: len(metadata[t].partitions[0].replicas) for t in topics if t in metadata and metadata[t].partitions}


def broker_count(admin: Any) -> int:
    return len(cluster_metadata(admin).brokers)


def _describe(admin: Any, topics: list[str], *, skipped: tuple[str, ...] = ()) -> dict[str, Any]:
    from confluent_kafka import TopicCollection

    if not topics:
        return {}
    return admin_request(
        lambda: admin.describe_topics(TopicCollection(topics), request_timeout=ADMIN_TIMEOUT_S),
        "cannot describe topics",
        admin,
        needs(admin, "DESCRIBE", "TOPIC " + named(set(topics), quoted=True)),
        skipped=skipped,
    )


def topic_ids(admin: Any, topics: list[str], *, gone_ok: bool = False) -> dict[str, str]:
    """Topic name -> Kafka topic id (changes when a topic is deleted and created again); with
    ``gone_ok``, topics deleted meanwhile are left out instead of failing the call."""
    return {
        name: str(info.topic_id)
        for name, info in _describe(admin, topics, skipped=TOPIC_GONE if gone_ok else ()).items()
    }


def known_topic_ids(admin: Any, topics: list[str]) -> dict[str, str] | None:
    """:func:`topic_ids` (topics deleted meanwhile left out), or None when the cluster will not
    say: for callers to whom the ids are a shortcut, with another way to the same answer."""
    try:
        return topic_ids(admin, topics, gone_ok=True)
    except SrmError as exc:
        log.info("topic ids not known: %s", exc)
        return None


def existing_topics(admin: Any, topics: list[str]) -> set[str]:
    """Those of ``topics`` the cluster has and shows this client, asked about them alone: on a
    cluster of thousands of topics far cheaper than listing them all (``partition_counts``), which
    leaves out the topics the principal may not describe, as this does."""
    return set(_describe(admin, topics, skipped=(*TOPIC_GONE, "TOPIC_AUTHORIZATION_FAILED")))


def create_partitions(admin: Any, topic: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions  # type: ignore[attr-defined]

    admin_request(
        lambda: admin.create_partitions([NewPartitions(topic, total)], operation_timeout=ADMIN_TIMEOUT_S),
        f"cannot grow topic {topic!r} to {total} partitions",
        admin,
        needs(admin, "ALTER", f"TOPIC {topic!r}"),
    )
