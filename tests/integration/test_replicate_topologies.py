"""Naming policies and topologies: identity one-way, default policy both ways without loops."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from srm import clients
from srm.config import SrmConfig
from srm.topics import ensure_topic, partition_counts
from tests.helpers import produce
from tests.replication import contents, make_env, replicate, sequenced, without_offsets

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
