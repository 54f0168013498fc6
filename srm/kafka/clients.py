"""confluent-kafka clients for a configured cluster: settings resolved, secrets kept out of logs.

Settings are layered: the Airflow connection (when ``connection_id`` is set: its extra JSON holds
librdkafka settings, host/port the bootstrap servers, login/password SASL credentials), then
``bootstrap.servers``, then the cluster's ``client`` block, then the role block (``producer``,
``consumer``, ``admin``), then the caller's overrides. ``${env:..}``/``${file:..}`` references are
resolved here, at the last moment. Resolved secrets are registered with Airflow's log masker
when running under Airflow, so a task log never shows them.
"""

from __future__ import annotations

import functools
import gc
import hashlib
import json
import logging
import sys
import time
from typing import Any, Literal

from pydantic import SecretStr

from srm.config.model import Cluster
from srm.config.secrets import is_secret, resolve_references
from srm.errors import ClusterUnreachableError, SrmError

Role = Literal["producer", "consumer", "admin"]
# librdkafka's own messages go through Python logging under this name, not raw to stderr. Its
# warnings are mostly transient retries (coordinator loading, leader moves) that it recovers from;
# errors it cannot recover from surface as exceptions. `--debug` lowers the level.
LIBRDKAFKA_LOG = logging.getLogger("srm.librdkafka")
log = logging.getLogger(__name__)
LIBRDKAFKA_LOG.setLevel(logging.ERROR)


# Kafka's Java clients and its brokers set TCP_NODELAY on every connection; librdkafka leaves
# Nagle's algorithm on unless told. With it on, a small request written while an earlier one on
# the same connection is not yet acknowledged waits for that ACK. Layered first: a connection's
# extra or a cluster's ``client`` block may set it back.
BASE_SETTINGS: dict[str, Any] = {"socket.nagle.disable": True}


# A transactional producer connects to every broker it learns of at once. librdkafka (2.16) drops
# its bootstrap connection once the first metadata names the brokers, and with sparse connections
# it connects to the transaction coordinator only when its producer-id timer fires again, 500 ms
# later: init_transactions took 0.50-0.51 s against 2-4 ms with this (a local broker), and each
# copier start, fence of an earlier epoch's producer and ownership claim waits for one. Such a
# producer talks to the coordinator and to its partitions' leaders anyway. A cluster's own
# settings (its Airflow connection, client or producer) override it like any default.
TRANSACTIONAL = {"enable.sparse.connections": False}


def client_settings(
    cluster: Cluster, role: Role, *, connection: dict[str, Any] | None = None, **overrides: Any
) -> dict[str, Any]:
    """librdkafka settings for one client of ``cluster`` (``connection``: its Airflow connection's,
    when looked up already). The result holds plain secrets: never log it."""
    settings: dict[str, Any] = dict(BASE_SETTINGS)
    if role == "producer" and "transactional.id" in overrides:
        settings.update(TRANSACTIONAL)
    if cluster.connection_id:
        settings.update(connection if connection is not None else connection_settings(cluster.connection_id))
    if cluster.bootstrap_servers:
        settings["bootstrap.servers"] = cluster.bootstrap_servers
    secret = {key for key, value in settings.items() if is_secret(key, value)}
    for block in (cluster.client, getattr(cluster, role)):
        for key, value in block.items():
            if is_secret(key, value):  # a SecretStr, or a reference whatever its key
                secret.add(key)
            plain = value.get_secret_value() if isinstance(value, SecretStr) else value
            settings[key] = resolve_references(plain, f"cluster {cluster.alias}, {key}")
    settings.update(overrides)
    secret |= {key for key, value in overrides.items() if is_secret(key, value)}
    if not settings.get("bootstrap.servers"):
        raise SrmError(f"cluster {cluster.alias}: no bootstrap servers (set bootstrap.servers or connection_id)")
    _mask_for_airflow(settings, secret)
    return settings


def settings_digest(cluster: Cluster) -> str:
    """A digest of every client setting of ``cluster`` as it resolves now (its Airflow connection,
    ``${env:}`` and ``${file:}`` references read again): a client built from other settings is
    stale, e.g. after a password rotation or a new bootstrap list. Never the settings themselves:
    a cache key, not something to log."""
    connection = connection_settings(cluster.connection_id) if cluster.connection_id else None  # looked up once
    roles: tuple[Role, ...] = ("producer", "consumer", "admin")
    resolved = {role: client_settings(cluster, role, connection=connection) for role in roles}
    text = json.dumps(resolved, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class SettingsWatch:
    """Tells which clusters' client settings resolve differently from the last look (a password
    rotated in the YAML, a ``${file:}``/``${env:}`` secret or an Airflow connection; a new bootstrap
    list): the clients built from the old ones must be built again."""

    def __init__(self, *clusters: Cluster) -> None:
        self._digests = {c.alias: settings_digest(c) for c in clusters}
        self._seen: dict[str, str] = {}

    def changed(self, *clusters: Cluster) -> list[str]:
        """The aliases whose settings resolve differently now; [] when they cannot be resolved at the
        moment (a secret file being rewritten, a secrets backend away): the current clients stay.
        Reported again until :meth:`accept` (after the new clients were built)."""
        try:
            now = {c.alias: settings_digest(c) for c in clusters}
        except (SrmError, OSError) as exc:
            log.warning("client settings not resolved now (%s); the current clients stay", exc)
            return []
        self._seen = now
        return [alias for alias, digest in now.items() if self._digests.get(alias) != digest]

    def accept(self) -> None:
        """The clients were built from the settings :meth:`changed` saw."""
        self._digests.update(self._seen)


def connection_settings(connection_id: str) -> dict[str, Any]:
    """Settings from an Airflow connection (any secrets backend, incl. AIRFLOW_CONN_* variables)."""
    from airflow.sdk import BaseHook

    try:
        conn = BaseHook.get_connection(connection_id)
    except Exception as exc:  # Airflow raises its own not-found types across versions
        raise SrmError(f"Airflow connection {connection_id!r} cannot be read: {exc}") from None
    settings: dict[str, Any] = {k: str(v) for k, v in conn.extra_dejson.items()}
    if "bootstrap.servers" not in settings and conn.host:
        settings["bootstrap.servers"] = f"{conn.host}:{conn.port}" if conn.port else conn.host
    if conn.login:
        settings.setdefault("sasl.username", conn.login)
    if conn.password:
        settings.setdefault("sasl.password", conn.password)
    return settings


def _mask_for_airflow(settings: dict[str, Any], secret: set[str]) -> None:
    """Register the values of ``secret`` keys (judged before their references were resolved)."""
    if "airflow.sdk" not in sys.modules:
        return
    from airflow.sdk.log import mask_secret

    for key, value in settings.items():
        if key in secret and isinstance(value, str) and value:
            mask_secret(value, key)


def admin_client(cluster: Cluster, **overrides: Any) -> Any:
    from confluent_kafka.admin import AdminClient

    admin: Any = AdminClient(client_settings(cluster, "admin", logger=LIBRDKAFKA_LOG, **overrides))
    admin.srm_cluster = f"{cluster.alias} ({cluster.describe()})"  # named in error messages
    admin.srm_alias = cluster.alias  # carried by ClusterUnreachableError
    admin.srm_principal = cluster.principal()  # named when an ACL is missing (srm.kafka.retry.needs)
    return admin


def list_metadata(client: Any, topic: str | None = None, timeout_s: float = 30.0) -> Any:
    """``client.list_topics(topic)`` with Python's cyclic garbage collector paused while
    confluent-kafka builds the answer: about five objects per topic, none in a cycle (reference
    counting frees them), whose allocation otherwise sets off collections that traverse them while
    they are built. A listing of 2,002 topics: 12.1 ms of CPU against 15.5 (bench notes, "Idle").
    A collection another thread would have started meanwhile comes at its next allocation."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        if topic is None:
            return client.list_topics(timeout=timeout_s)
        return client.list_topics(topic, timeout=timeout_s)
    finally:
        if paused:
            gc.enable()


# How long settled() waits for a client's first metadata from a broker it learned of.
SETTLE_S = 2.0  # ms on a healthy cluster; a cluster down costs a new client this much


def settled(client: Any, timeout_s: float = SETTLE_S) -> Any:
    """``client``, once it has metadata from a broker that metadata named, not from the bootstrap
    address it started with.

    librdkafka (2.16) drops its bootstrap connection as soon as the first metadata names the
    brokers. A request it queued on that connection meanwhile (an admin call's query for partition
    leaders, a consumer's or producer's topic metadata) fails locally and is sent again by a timer:
    a fresh client's first ListOffsets took 1.0 or 3.0 s in 11 of 50 tries on an idle local broker,
    0.0-0.07 s after this wait in 50 of 50 (the wait included). A copy task builds five clients,
    and one in three copies of 512 partitions lost 3 s so. Gives up after ``timeout_s``, or at the
    first error, without raising: the client's first call then reports the cluster as it would have."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while (left := deadline - time.monotonic()) > 0:
        try:
            if list_metadata(client, timeout_s=left).orig_broker_id >= 0:
                break
        except KafkaException:
            break
        time.sleep(0.01)
    return client


def check_reachable(cluster: Cluster, timeout_s: float = 15.0) -> None:
    """Raise ClusterUnreachableError unless the cluster returns metadata within ``timeout_s``."""
    from confluent_kafka import KafkaException

    admin = admin_client(cluster)
    try:
        list_metadata(admin, timeout_s=timeout_s)
    except KafkaException as exc:
        detail = exc.args[0].str() if exc.args else str(exc)
        raise ClusterUnreachableError(
            f"cluster {cluster.alias} ({cluster.describe()}) did not answer within {timeout_s:.0f} s: {detail}; "
            f"check clusters.{cluster.alias} (bootstrap servers, security settings) and that it is running",
            cluster=cluster.alias,
        ) from None


def producer(cluster: Cluster, **overrides: Any) -> Any:
    from confluent_kafka import Producer

    return Producer(client_settings(cluster, "producer", logger=LIBRDKAFKA_LOG, **overrides))


CLOSE_TIMEOUT_S = 5.0  # per step of closing a producer: aborting its transaction, flushing


def close_producer(producer: Any, timeout_s: float = CLOSE_TIMEOUT_S) -> bool:
    """Close ``producer`` within about twice ``timeout_s`` whatever its cluster does: an open
    transaction aborted and the queue flushed, else it is abandoned (:func:`abandon_producer`).
    confluent-kafka's ``close()`` aborts and flushes without a time-out, so a cluster that does
    not answer would hold the caller for good. False when abandoned."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        producer.abort_transaction(timeout_s)
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        if error is None or error.code() not in (KafkaError._STATE, KafkaError._NOT_CONFIGURED):
            abandon_producer(producer)  # an open transaction the cluster did not let abort
            return False
    if producer.flush(timeout_s):
        abandon_producer(producer)
        return False
    try:  # aborted and flushed: close() returns at once
        producer.close()
    except Exception as exc:  # a producer in a fatal state: what failed before matters, not this
        log.warning("closing a producer failed (%s)", exc)
    return True


def abandon_producer(producer: Any) -> None:
    """Drop what ``producer`` holds without waiting for its cluster; librdkafka destroys it with
    its last reference. An open transaction is aborted by the next writer of its transactional
    id, or by the broker after transaction.timeout.ms."""
    try:
        producer.purge(in_queue=True, in_flight=True, blocking=False)
    except Exception as exc:
        log.warning("purging a producer failed (%s)", exc)


def consumer(cluster: Cluster, group_id: str, **overrides: Any) -> Any:
    from confluent_kafka import Consumer

    return Consumer(_consumer_settings(cluster, group_id, overrides))


def _consumer_settings(cluster: Cluster, group_id: str, overrides: dict[str, Any]) -> dict[str, Any]:
    defaults = {"group.id": group_id, "enable.auto.commit": False, "isolation.level": "read_committed"}
    return client_settings(cluster, "consumer", logger=LIBRDKAFKA_LOG, **{**defaults, **overrides})


# How a consumer that reads partitions to their end (srm.kafka.partitions.read_to_end) is set: the end of a
# partition is an event, and a fetch that finds nothing more returns after 10 ms instead of
# librdkafka's default 500 ms, which every read otherwise waited out at its end (one record read to the
# end: 1.05 s, 0.05 s with this, measured here). Not for a consumer left assigned: it would fetch
# every 10 ms for as long as it stays so.
READER = {"enable.partition.eof": True, "fetch.wait.max.ms": 10}


# SCRAM credentials just created take a moment to reach a broker; a password rotated since a client
# was built is refused for good: a read refused this long without a break gives up.
REFUSED_S = 10.0


class Refusals:
    """A reader's ``error_cb`` (served in its consume calls): since when ``cluster`` has refused its
    credentials without a break. librdkafka reconnects with a backoff of at most
    ``reconnect.backoff.max.ms`` (10 s): refusals further apart than REFUSED_S start afresh."""

    def __init__(self, cluster: str) -> None:
        self.cluster = cluster
        self.since: float | None = None
        self.last: float | None = None
        self.error = ""

    def __call__(self, error: Any) -> None:
        if error.name() != "_AUTHENTICATION":
            return  # librdkafka retries the others itself; its log says them (LIBRDKAFKA_LOG)
        now = time.monotonic()
        if self.last is None or now - self.last > REFUSED_S:
            self.since = now
        self.last, self.error = now, error.str()

    def check(self, where: str) -> None:
        """Raise when the cluster has refused the credentials for REFUSED_S, refusing them still."""
        if self.since is None or self.last is None or time.monotonic() - self.last > REFUSED_S:
            return
        if self.last - self.since >= REFUSED_S:
            raise ClusterUnreachableError(
                f"reading {where}: cluster {self.cluster} has refused the client's credentials for "
                f"{self.last - self.since:.0f} s ({self.error}); a password changed since the client was "
                "built is taken up by the flow's next clients",
                cluster=self.cluster,
            )


def reader(cluster: Cluster, group_id: str, **overrides: Any) -> Any:
    """A consumer for reading partitions to their end (READER), read_committed unless told otherwise;
    its ``refusals`` (:class:`Refusals`) end a read its cluster keeps refusing (read_to_end)."""
    refusals = Refusals(cluster.alias)
    built = _reader_type()(_consumer_settings(cluster, group_id, {**READER, "error_cb": refusals, **overrides}))
    built.refusals = refusals
    return built


@functools.cache
def _reader_type() -> type:
    """confluent-kafka's Consumer with a ``refusals`` attribute (the C type takes none of its own),
    made once: confluent_kafka is imported on first use, never at DAG parse time."""
    from confluent_kafka import Consumer

    return type("Reader", (Consumer,), {"__doc__": "A consumer reading partitions to their end (reader)."})
