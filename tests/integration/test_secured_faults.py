"""Faults of a secured pair (SASL_SSL/SCRAM-SHA-512, an authorizer) under a running continuous flow:
the replicator's WRITE ACL revoked ends the run naming the principal, the resource and the operation,
and the next run goes on exactly; a password rotated on the clusters and in the secret the flow reads
it from is taken up without a restart, and appears in no log or table."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from srm.config.model import Cluster
from srm.errors import ClusterUnreachableError
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.operations.acls import acl_bindings, flow_grants
from srm.replication.deliveries import FLUSH_TIMEOUT_S
from srm.replication.launch import start_replication
from srm.storage.warehouse import FLOW_STATES, METRICS, TASK_FAILURES
from tests.conftest import REFERENCE, SASL_PASSWORD
from tests.helpers import spark_defaults
from tests.integration.test_least_privilege import grant, revoke
from tests.integration.test_replicate_continuous import target_records, wait_for
from tests.jobs import Job, Writer, exactly_once
from tests.replication import CLEAN, Env, replicate, shown_status
from tests.secured import SecuredCluster, secured_env

pytestmark = pytest.mark.integration

PER_20_MS = 20  # Writer's burst: 1,000 records/s


def flow_user(secured: dict[str, SecuredCluster], user: str, password: str) -> None:
    for cluster in secured.values():
        cluster.security.upsert_user(cluster.bootstrap, user, password, cluster.alias)


def grant_flow(secured: dict[str, SecuredCluster], env: Env, principal: str) -> None:
    flow, grants = env.flow(), flow_grants(env.flow())
    for alias, side in ((flow.source, "west"), (flow.target, "east")):
        admin = clients.admin_client(secured[side].admin())
        grant(admin, acl_bindings([g for g in grants if g.cluster == alias], principal))


def write_on_remote_topics(env: Env, principal: str, kind: Any = None) -> Any:
    """The binding (or, with ``kind`` AclBindingFilter, its filter) of WRITE on every remote topic."""
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    prefix = env.flow().policy.format_remote_topic(env.flow().source, "")
    return (kind or AclBinding)(
        ResourceType.TOPIC,
        prefix,
        ResourcePatternType.PREFIXED,
        principal,
        "*",
        AclOperation.WRITE,
        AclPermissionType.ALLOW,
    )


def test_write_revoked_during_a_continuous_run_ends_it_naming_who_needs_what_and_the_next_run_goes_on_exactly(
    secured: dict[str, SecuredCluster], spark: Any, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    from confluent_kafka.admin import AclBindingFilter

    user, topic = unique("revoked"), unique("rv-orders")
    flow_user(secured, user, SASL_PASSWORD)
    principal = f"User:{user}"
    env = secured_env(
        secured,
        tmp_path,
        {"topics": [topic], "task.lease.seconds": 10},
        {"sasl.username": user, "sasl.password": REFERENCE},
    )
    grant_flow(secured, env, principal)
    source, target = secured["west"].admin(), clients.admin_client(secured["east"].admin())
    ensure_topic(clients.admin_client(source), topic, 2)
    writer = Writer(source, topic, 2, burst=PER_20_MS)
    writer.start()
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    ended: list[BaseException | None] = []

    def wait() -> None:
        try:
            run.wait()
            ended.append(None)
        except BaseException as exc:
            ended.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    try:
        wait_for(lambda: target_records(env, topic) > 1000, 120, "copying")
        revoke(target, [write_on_remote_topics(env, principal, AclBindingFilter)])
        revoked = time.monotonic()
        waiter.join(FLUSH_TIMEOUT_S)
        failed_after = time.monotonic() - revoked
    finally:
        sent = writer.stop()
        if waiter.is_alive():
            run.stop()
    assert ended and ended[0] is not None, "the run went on without WRITE on its remote topics"
    message = str(ended[0])
    assert "not authorized to write" in message and f"{principal} (clusters.{env.flow().target}) needs WRITE" in message
    # Spark tries the task 4 times, each ending as its first transaction is refused: the records
    # queued behind a partition the target would not add are purged, not waited for (up to
    # FLUSH_TIMEOUT_S each, before).
    assert failed_after < 60, f"failed {failed_after:.0f} s after the revocation"
    for where, (state, reason) in shown_status(env).items():
        assert state == "failed" and "not authorized to write" in reason, (where, state, reason)

    grant(target, [write_on_remote_topics(env, principal)])  # the cause fixed
    replicate(spark, env)
    assert exactly_once(env, topic, sent, 2) == CLEAN


def test_a_password_rotated_under_a_running_flow_is_taken_up_without_a_restart_and_never_shown(
    secured: dict[str, SecuredCluster],
    tmp_path: Path,
    unique: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    user, topic = unique("rotor"), unique("rot-orders")
    old, new = f"old-{uuid.uuid4().hex}", f"new-{uuid.uuid4().hex}"
    flow_user(secured, user, old)
    secret = tmp_path / "secret.properties"  # where the flow reads its password, as a vault agent writes it
    secret.write_text(f"password = {old}\n")
    env = secured_env(
        secured,
        tmp_path,
        {"topics": [topic], "task.lease.seconds": 10},
        {"sasl.username": user, "sasl.password": f"${{file:{secret}:password}}"},
    )
    grant_flow(secured, env, f"User:{user}")
    source = secured["west"].admin()
    ensure_topic(clients.admin_client(source), topic, 2)
    writer = Writer(source, topic, 2, burst=PER_20_MS)
    writer.start()
    events = tmp_path / "events"
    monkeypatch.setenv("SPARK_CONF_DIR", str(spark_defaults(tmp_path / "spark-conf", events)))
    # As Airflow's task runs it: srm-control run replicate, its log (driver and workers) the task log.
    job = Job(env.path, env.west.alias, env.east.alias, tmp_path / "task.log")
    try:
        wait_for(lambda: target_records(env, topic) > 1000, 180, "copying")
        flow_user(secured, user, new)  # rotated on both clusters...
        written = secret.with_suffix(".new")  # ...and in the secret, replaced whole as a vault agent does
        written.write_text(f"password = {new}\n")
        written.replace(secret)
        stale_client = {
            **{k: v for k, v in env.east.client.items() if k != "sasl.password"},
            "sasl.password": SecretStr(old),
        }
        stale = Cluster(alias="stale", bootstrap_servers=env.east.bootstrap_servers, client=stale_client)
        with pytest.raises(ClusterUnreachableError):  # the old password opens no new connection
            clients.check_reachable(stale, 10)
        copied = target_records(env, topic)
        resumed = wait_for(lambda: target_records(env, topic) > copied + 2000, 60, "copying after the rotation")
        job.wait_for("the client settings of .* changed", 30)  # the driver noticed
        sent = writer.stop()
        wait_for(lambda: target_records(env, topic) >= sent, 120, "catching up")
    finally:
        writer.stop()
        assert job.stop() == 0, job.text()[-3000:]
    assert resumed < 30, f"copying paused {resumed:.0f} s (leases of 10 s)"
    assert exactly_once(env, topic, sent, 2) == CLEAN
    logs = {"task log": job.text()} | {f"event log {f}": f.read_text() for f in events.rglob("*") if f.is_file()}
    assert len(logs) > 1, "no Spark event log was written"
    for table in (METRICS, FLOW_STATES, TASK_FAILURES):
        logs[table] = str(env.warehouse.read(table))
    for where, text in logs.items():
        assert new not in text and old not in text, where


def test_a_read_whose_password_the_cluster_refuses_ends_naming_the_cluster_within_seconds(
    secured: dict[str, SecuredCluster],
) -> None:
    """A reader built just before its password was rotated (the history's ingest under a running
    flow did so) is refused on every reconnection: its read ends naming the cluster after
    REFUSED_S, not after its 60 s of nothing, and the error shows no password."""
    from srm.kafka.partitions import read_to_end

    admin = secured["east"].admin()
    stale_client = {**admin.client, "sasl.password": SecretStr(f"old-{uuid.uuid4().hex}")}
    stale = Cluster(alias="east-stale", bootstrap_servers=admin.bootstrap_servers, client=stale_client)
    started = time.monotonic()
    with pytest.raises(
        ClusterUnreachableError, match=r"cluster east-stale has refused the client's credentials"
    ) as refused:
        list(read_to_end(clients.reader(stale, "__srm.history-ingest"), "__consumer_offsets", 0, timeout_s=60))
    took = time.monotonic() - started
    assert clients.REFUSED_S <= took < clients.REFUSED_S + 25, took  # reconnections back off up to 10 s
    assert refused.value.cluster == "east-stale"
    assert "invalid credentials" in str(refused.value) and stale_client["sasl.password"].get_secret_value() not in str(
        refused.value
    )
