"""``airflow dags test`` of every generated DAG against the session's clusters, effects asserted there."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.devenv.airflow import DagRun, LocalAirflow
from srm.kafka import clients
from srm.kafka.topics import describe_config_values, ensure_topic, partition_counts, topic_replication_factors
from srm.maintenance.internal import META_TOPIC, flow_topics
from srm.offsets.checkpoint_store import read_checkpoints
from tests.checkpointing import active_member, commit, committed_on, read_from
from tests.helpers import produce, read_all
from tests.integration.test_replicate_copy import alter_topic
from tests.replication import Env, contents, make_env, sequenced, without_offsets

pytestmark = pytest.mark.integration
Airflow = Callable[[Path], LocalAirflow]


def run_dag(env: Env, airflow: Airflow, job: str, conf: dict[str, Any] | None = None) -> DagRun:
    flow = env.flow()
    dag_id = job if job.startswith("srm.") else f"{flow.source}_to_{flow.target}.{job}"
    run = airflow(env.path).dags_test(dag_id, conf)
    logs = env.tmp / "dag-runs"
    logs.mkdir(exist_ok=True)
    (logs / f"{len(list(logs.iterdir())):02d}-{dag_id}.log").write_text(run.log)  # for a failing test's reader
    return run


def ok(run: DagRun) -> DagRun:
    assert run.succeeded, f"{run.dag_id}: {run.state}\n" + "\n".join(run.log.splitlines()[-40:])
    return run


def config_of(cluster: Any, topic: str) -> dict[str, str | None]:
    return {c.name: c.value for c in describe_config_values(clients.admin_client(cluster), topic)}


def resumes_exactly(
    env: Env, topic: str, remote: str, source_positions: dict[int, int], target: dict[int, int]
) -> None:
    """Reading the remote topic from ``target`` yields exactly what the source group had not read."""
    source = contents(env.west, topic)
    for partition, upstream in source_positions.items():
        unread = [r[:4] for r in source[partition] if r[4] >= upstream]
        assert read_from(env.east, remote, partition, target[partition]) == unread, f"{topic}[{partition}]"


def test_replicate_checkpoints_and_failover(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], airflow: Airflow
) -> None:

    topic = unique("af-orders")
    env = make_env(
        kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic], "sync.group.offsets.enabled": True}]
    )
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    ensure_topic(clients.admin_client(env.west), topic, 3)
    produce(env.west, topic, sequenced(3, 300))

    # .replicate in available-now mode copies everything, record for record, and says so in the log
    run = ok(run_dag(env, airflow, "replicate", {"mode": "available-now"}))
    assert without_offsets(contents(env.east, remote)) == without_offsets(contents(env.west, topic))
    assert re.search(rf"flow {flow.name} batch \d+: \d+ record\(s\)", run.log)  # the job's batch lines
    submitted = re.search(r"Spark-Submit cmd: (.*)", run.log)
    assert submitted and "spark.driver.extraJavaOptions=-Dlog4j2.configurationFile=" in submitted[1]
    assert "-Xms" not in submitted[1]  # the heap floor is for continuous jobs only (srm.spark.submit)

    # .checkpoints writes exact MM2 checkpoints and syncs the idle target group
    group = unique("af-billing")
    first = {0: 10, 1: 55, 2: 0}
    commit(env.west, group, {(topic, p): o for p, o in first.items()})
    run = ok(run_dag(env, airflow, "checkpoints"))
    checkpoints = {
        c.partition: c
        for c in read_checkpoints(env.east, flow.policy.checkpoints_topic(flow.source)).values()
        if c.group == group
    }
    assert {p: c.upstream_offset for p, c in checkpoints.items()} == first
    downstream = {p: c.downstream_offset for p, c in checkpoints.items()}
    resumes_exactly(env, topic, remote, first, downstream)
    assert committed_on(env.east, group) == {(remote, p): o for p, o in downstream.items()}
    assert f"{group}: " in run.log  # the sync task logs each group it wrote

    # srm.failover: a dry run changes nothing; applied, the group resumes exactly where it was on the source
    later = {0: 90, 1: 100, 2: 37}
    commit(env.west, group, {(topic, p): o for p, o in later.items()})
    params = {"source": flow.source, "target": flow.target, "groups": group, "mode": "planned"}
    run = ok(run_dag(env, airflow, "srm.failover", params))
    assert "dry run: not applied" in run.log
    assert committed_on(env.east, group) == {(remote, p): o for p, o in downstream.items()}
    run = ok(run_dag(env, airflow, "srm.failover", {**params, "dry_run": False}))
    after = committed_on(env.east, group)
    resumes_exactly(env, topic, remote, later, {p: after[(remote, p)] for p in later})
    assert "applied" in run.log

    # an active group on the target is refused, named in the failed task, and left as it was
    busy = unique("af-busy")
    commit(env.west, busy, {(topic, 0): 5})
    with active_member(env.east, busy, remote, committed=1):
        run = run_dag(env, airflow, "srm.failover", {**params, "groups": busy, "dry_run": False})
        assert run.state == "failed"
        assert "refused: active on" in run.log and busy in run.log
        assert committed_on(env.east, busy) == {(remote, 0): 1}


def test_maintenance_creates_internal_and_remote_topics_syncs_configs_and_writes_meta(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], airflow: Airflow
) -> None:
    from confluent_kafka.admin import NewPartitions

    topic = unique("af-maint")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    west = clients.admin_client(env.west)
    ensure_topic(west, topic, 3)
    alter_topic(west, topic, {"retention.ms": "3600000", "max.message.bytes": "200000"})

    run = ok(run_dag(env, airflow, "maintenance"))
    for internal in flow_topics(flow):
        admin = clients.admin_client(env.config.cluster(internal.cluster))
        assert partition_counts(admin, include_internal=True).get(internal.name) == internal.partitions, internal
        cleanup = config_of(env.config.cluster(internal.cluster), internal.name)["cleanup.policy"]
        assert cleanup == internal.cleanup_policy, internal
    east = clients.admin_client(env.east)
    assert partition_counts(east)[remote] == 3
    assert config_of(env.east, remote)["retention.ms"] == "3600000"
    assert config_of(env.east, remote)["max.message.bytes"] == "200000"
    assert f"internal topics of {flow.name}: {len(flow_topics(flow))} checked" in run.log

    meta = [json.loads(m.value()) for m in read_all(env.east, META_TOPIC, 10**9, timeout_s=3)]
    latest = [m for m in meta if (m["source"], m["target"]) == (flow.source, flow.target)][-1]
    heartbeats = flow.policy.format_remote_topic(flow.source, "heartbeats")
    assert latest["pairs"] == [
        {"source_topic": topic, "target_topic": remote},
        {"source_topic": "heartbeats", "target_topic": heartbeats},  # replicated by every flow, as MM2's
    ]

    # the source changes: more partitions and a new retention follow on the next run
    for future in west.create_partitions([NewPartitions(topic, 5)]).values():
        future.result(30)
    alter_topic(west, topic, {"retention.ms": "7200000"})
    run = ok(run_dag(env, airflow, "maintenance"))
    assert partition_counts(east)[remote] == 5
    assert config_of(env.east, remote)["retention.ms"] == "7200000"
    assert f"{remote}: retention.ms 3600000 -> 7200000" in run.log


def test_maintenance_mirrors_topic_acls(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], airflow: Airflow
) -> None:
    from confluent_kafka.admin import AclBinding, AclOperation, AclPermissionType, ResourcePatternType, ResourceType

    from srm.maintenance.acl_sync import Acl, source_acls

    topic = unique("af-acl")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    remote = env.flow().policy.format_remote_topic(env.west.alias, topic)
    west = clients.admin_client(env.west)
    if source_acls(west, {topic}) is None:
        pytest.skip("the clusters have no authorizer (SRM_TEST_CONFIG points at clusters without one)")
    ensure_topic(west, topic, 1)
    grants = [
        ("User:alice", AclOperation.READ, AclPermissionType.ALLOW),
        ("User:bob", AclOperation.ALL, AclPermissionType.ALLOW),
        ("User:carol", AclOperation.WRITE, AclPermissionType.ALLOW),
        ("User:mallory", AclOperation.READ, AclPermissionType.DENY),
    ]
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, p, "*", o, k) for p, o, k in grants]
    for future in west.create_acls(bindings).values():
        future.result(30)

    run = ok(run_dag(env, airflow, "maintenance"))
    mirrored = set(source_acls(clients.admin_client(env.east), {remote}) or [])
    assert mirrored == {
        Acl(remote, "User:alice", "*", "READ", "ALLOW"),
        Acl(remote, "User:bob", "*", "READ", "ALLOW"),  # ALLOW ALL becomes READ
        Acl(remote, "User:mallory", "*", "READ", "DENY"),
    }  # ALLOW WRITE is never mirrored: only the replication writes remote topics
    assert "3 binding(s) created" in run.log


def test_misconfigured_internal_topic_fails_validation_and_is_left_alone(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], airflow: Airflow
) -> None:
    topic = unique("af-bad")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    flow = env.flow()
    checkpoints = flow.policy.checkpoints_topic(flow.source)
    east = clients.admin_client(env.east)
    ensure_topic(east, checkpoints, 2, config={"cleanup.policy": "delete"})
    ensure_topic(clients.admin_client(env.west), topic, 1)

    run = run_dag(env, airflow, "maintenance")
    assert run.state == "failed"
    assert checkpoints in run.log and "cleanup.policy" in run.log
    assert f"internal topic '{checkpoints}' on {env.east.alias}: cleanup.policy is delete, expected compact" in run.log
    assert "not retried" in run.log
    assert config_of(env.east, checkpoints)["cleanup.policy"] == "delete"  # not altered
    assert partition_counts(east, include_internal=True)[checkpoints] == 2
    assert topic_replication_factors(east, [checkpoints])[checkpoints] == 1
    remote = flow.policy.format_remote_topic(flow.source, topic)
    assert remote not in partition_counts(east)  # the steps after validation did not run


def test_heartbeats_sensor_fails_on_a_stopped_flow_and_passes_on_a_live_one(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], airflow: Airflow
) -> None:
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [unique("af-hb")]}])
    replicated = env.flow().policy.format_remote_topic(env.west.alias, "heartbeats")
    # three `airflow dags test` runs pass between the first heartbeat and the live check: ~90 s
    params = {"duration_seconds": 2, "stall_threshold_seconds": 180, "wait_seconds": 1}

    # never replicated: the sensor fails, naming the flow; emit has written both pairs' heartbeats
    run = run_dag(env, airflow, "heartbeats", params)
    assert run.state == "failed"
    assert f"flow {env.west.alias}->{env.east.alias} has stalled: no heartbeat has ever been replicated" in run.log
    pairs = f"{env.west.alias}->{env.east.alias}, {env.east.alias}->{env.west.alias}"
    assert re.search(rf"emitted \d+ heartbeat\(s\) for {pairs} over 2 s", run.log)

    # a replication pass carries the heartbeats the reverse pair wrote on west to east: alive
    ok(run_dag(env, airflow, "replicate", {"mode": "available-now"}))
    assert read_all(env.east, replicated, 1)
    run = ok(run_dag(env, airflow, "heartbeats", params))
    assert f"flow {env.west.alias}->{env.east.alias} is alive" in run.log

    # replication stopped: new heartbeats are emitted but none arrive, the newest replicated one ages
    run = run_dag(env, airflow, "heartbeats", {**params, "stall_threshold_seconds": 5})
    assert run.state == "failed"
    assert "has stalled: the newest replicated heartbeat is" in run.log
