"""Naming policies and topologies: identity one-way, default policy both ways without loops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.config.model import Cluster
from srm.kafka import clients
from srm.kafka.topics import ensure_topic, partition_counts
from srm.offsets.checkpointing import CheckpointPass
from tests.checkpointing import commit, committed_on, read_from
from tests.conftest import Run
from tests.helpers import produce
from tests.replication import Env, as_row, contents, make_env, replicate, seq_of, sequenced, without_offsets

pytestmark = pytest.mark.integration


def test_identity_policy_keeps_topic_names(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topic = unique("ident")
    env = make_env(
        kafka,
        tmp_path,
        [{"source": "west", "target": "east", "topics": [topic], "replication.policy.class": "identity"}],
    )
    ensure_topic(clients.admin_client(env.west), topic, 2)
    produce(env.west, topic, sequenced(2, 200))
    replicate(spark, env)
    assert without_offsets(contents(env.east, topic)) == without_offsets(contents(env.west, topic))
    assert f"{env.west.alias}.{topic}" not in partition_counts(clients.admin_client(env.east))


def test_default_policy_both_ways_has_no_loop(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str]
) -> None:
    token = unique("loop")
    admits = [f".*{token}.*"]  # like ".*" on both sides, but limited to this test's topics
    env = make_env(
        kafka,
        tmp_path,
        [
            {"source": "west", "target": "east", "topics": admits},
            {"source": "east", "target": "west", "topics": admits},
        ],
    )
    west_topic, east_topic = f"w-{token}", f"e-{token}"
    ensure_topic(clients.admin_client(env.west), west_topic, 1)
    ensure_topic(clients.admin_client(env.east), east_topic, 1)
    produce(env.west, west_topic, sequenced(1, 20))
    produce(env.east, east_topic, sequenced(1, 30))
    forward, backward = env.flow(env.west.alias, env.east.alias), env.flow(env.east.alias, env.west.alias)
    for _ in range(2):  # each direction twice: a loop would show up as doubly prefixed topics
        replicate(spark, env, forward)
        replicate(spark, env, backward)
    w, e = env.west.alias, env.east.alias
    on_west = {t for t in partition_counts(clients.admin_client(env.west)) if token in t}
    on_east = {t for t in partition_counts(clients.admin_client(env.east)) if token in t}
    assert on_west == {west_topic, f"{e}.{east_topic}"}
    assert on_east == {east_topic, f"{w}.{west_topic}"}
    assert sum(len(r) for r in contents(env.east, f"{w}.{west_topic}").values()) == 20
    assert sum(len(r) for r in contents(env.west, f"{e}.{east_topic}").values()) == 30


def origins(records: list[tuple[Any, ...]]) -> dict[str | None, list[int]]:
    """Sequence numbers per provenance origin (None: produced on this cluster), in offset order."""
    by_origin: dict[str | None, list[int]] = {}
    for record in records:
        headers = dict(record[2] or [])
        origin = headers.get("srm.origin")
        by_origin.setdefault(origin.decode() if origin else None, []).append(seq_of(record))
        if origin is not None:
            assert headers["srm.hops"] == b"1", record  # copied once, straight from its origin
    return by_origin


def test_prefixless_active_active_with_provenance_headers_copies_each_record_once(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], cli: Run
) -> None:
    topic = unique("aa-orders")
    both = {"topics": [topic], "replication.policy.class": "identity", "provenance.headers.enabled": True}
    env = make_env(
        kafka, tmp_path, [{"source": "west", "target": "east", **both}, {"source": "east", "target": "west", **both}]
    )
    w, e = env.west.alias, env.east.alias
    for cluster in (env.west, env.east):
        ensure_topic(clients.admin_client(cluster), topic, 3)
    produced = {w: sequenced(3, 600), e: sequenced(3, 600, start=100_000)}

    def write_both_sides() -> None:  # producers on both clusters at once, in small batches
        for batch in range(6):
            for cluster in (env.west, env.east):
                produce(cluster, topic, produced[cluster.alias][100 * batch : 100 * (batch + 1)])
            time.sleep(0.3)

    writer = threading.Thread(target=write_both_sides)
    writer.start()
    forward, backward = env.flow(w, e), env.flow(e, w)
    while writer.is_alive():  # copies in both directions while both sides are written
        replicate(spark, env, forward)
        replicate(spark, env, backward)
    writer.join()
    both_ways(spark, env, rounds=2)  # after the last write, twice: a loop would show up as more records

    for cluster, other in ((env.west, e), (env.east, w)):
        held = contents(cluster, topic)
        assert sum(map(len, held.values())) == 1200, cluster.alias
        for partition, records in held.items():
            by_origin = origins(records)
            local = [seq_of(as_row(r)) for r in produced[cluster.alias] if r["partition"] == partition]
            copied = [seq_of(as_row(r)) for r in produced[other] if r["partition"] == partition]
            # each record once, in its origin's order; nothing came back to the cluster it was produced on
            assert by_origin == {None: local, other: copied}, (cluster.alias, partition)

    # A group that read all of orders on west fails over to east, reads there all that came since, and
    # fails back: each time it resumes at exactly the records it has not read, from both origins.
    group, flow_args = unique("aa-reader"), ("--source", w, "--target", e)
    commit(env.west, group, read_to_the_end(env.west, topic))
    later = more_on_both_sides(spark, env, topic, start=1000)
    CheckpointPass(env.config, forward).run()
    code, out, err = cli(env.path, "failover", *flow_args, "--group", group, "--apply")
    assert code == 0 and out.count("applied") == 3, out + err
    assert unread(env.east, topic, committed_on(env.east, group)) == later
    commit(env.east, group, read_to_the_end(env.east, topic))
    later = more_on_both_sides(spark, env, topic, start=2000)
    code, out, err = cli(env.path, "failback", *flow_args, "--group", group, "--apply")
    assert code == 0 and out.count("applied") == 3, out + err
    assert unread(env.west, topic, committed_on(env.west, group)) == later


def read_to_the_end(cluster: Cluster, topic: str) -> dict[tuple[str, int], int]:
    """The positions of a group that read every record of ``topic`` (one past the last, markers aside)."""
    return {(topic, p): records[-1][4] + 1 for p, records in contents(cluster, topic).items()}


def both_ways(spark: Any, env: Env, rounds: int) -> None:
    w, e = env.west.alias, env.east.alias
    for _ in range(rounds):
        replicate(spark, env, env.flow(w, e))
        replicate(spark, env, env.flow(e, w))


def more_on_both_sides(spark: Any, env: Env, topic: str, start: int) -> dict[int, set[int]]:
    """Write 60 more records on each side, copy both ways; their sequence numbers per partition. East's
    are written after west's were copied there, so each side ends with records of both origins mixed
    differently: a translation that looked at one flow's runs only would re-read some."""
    records = {env.west.alias: sequenced(3, 60, start=start), env.east.alias: sequenced(3, 60, start=start + 500)}
    produce(env.west, topic, records[env.west.alias])
    replicate(spark, env, env.flow(env.west.alias, env.east.alias))
    produce(env.east, topic, records[env.east.alias])
    both_ways(spark, env, rounds=2)
    return {p: {seq_of(as_row(r)) for side in records.values() for r in side if r["partition"] == p} for p in range(3)}


def unread(cluster: Cluster, topic: str, committed: dict[tuple[str, int], int]) -> dict[int, set[int]]:
    """Per partition, the sequence numbers a consumer of the group reads on ``cluster`` (each once)."""
    found = {}
    for partition in range(3):
        records = [seq_of(r) for r in read_from(cluster, topic, partition, committed[(topic, partition)])]
        assert len(records) == len(set(records)), records
        found[partition] = set(records)
    return found
