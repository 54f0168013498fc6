"""The JVM tools of the benchmarks (MirrorMaker 2, the Java textbook copier) get bootstrap servers only;
every tool's run is known by the random part of its alias, which its topics hold."""

from __future__ import annotations

import pytest

from bench.common import run_topics
from bench.replicators import plaintext_servers, run_token
from srm.config.model import Cluster


def test_a_plaintext_cluster_gives_its_bootstrap_servers() -> None:
    assert plaintext_servers(Cluster(alias="east", bootstrap_servers="127.0.0.1:29092"), "MM2") == "127.0.0.1:29092"


def test_a_secured_cluster_or_one_without_servers_is_refused_by_name() -> None:
    secured = Cluster(alias="east", bootstrap_servers="b:9093", client={"security.protocol": "SASL_SSL"})
    with pytest.raises(SystemExit, match=r"clusters.east \(b:9093, security.protocol SASL_SSL\): .* MM2 on plaintext"):
        plaintext_servers(secured, "MM2")
    by_connection = Cluster(alias="west", connection_id="kafka_west")
    with pytest.raises(
        SystemExit, match=r"clusters.west \(Airflow connection 'kafka_west', security.protocol PLAINTEXT\)"
    ):
        plaintext_servers(by_connection, "MM2")


@pytest.mark.parametrize(
    ("alias", "topics"),
    [
        # ours: the flow's source and target aliases, on both clusters
        ("bsb1c2d3", ["bsb1c2d3.bench-lat-1", "srm-status.bsb1c2d3.internal", "mm2-offset-syncs.btb1c2d3.internal"]),
        # MirrorMaker 2: its source alias m<token> and target alias tm<token>
        ("m0e8659", ["m0e8659.heartbeats", "mm2-configs.m0e8659.internal", "mm2-offset-syncs.tm0e8659.internal"]),
        ("x1bac14", ["x1bac14.bench-lat-1"]),  # the textbook copiers
        ("j1bac14", ["j1bac14.bench-lat-1"]),
    ],
)
def test_every_topic_of_a_run_and_no_other_is_the_runs(alias: str, topics: list[str]) -> None:
    token = run_token(alias)
    assert token is not None and len(token) == 6
    others = [
        "srm-offset-syncs.bs0f00aa.internal",  # another run's
        f"orders-{token}",  # a user's topic holding the same hex, not as an alias
        f"{token}x.events",
        "heartbeats",
        "srm-owners.internal",
    ]
    assert run_topics([*others, *topics], token) == topics


@pytest.mark.parametrize("alias", ["us-west", "bs", "m12", "xyz12345", "bsb1c2d3e", "b1c2d3"])
def test_an_alias_not_made_by_a_benchmark_gives_no_token(alias: str) -> None:
    """Topics are deleted by a run's token only: a short or foreign one would match others' topics."""
    assert run_token(alias) is None
