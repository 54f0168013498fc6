"""The JVM tools of the benchmarks (MirrorMaker 2, the Java textbook copier) get bootstrap servers only."""

from __future__ import annotations

import pytest

from bench.replicators import plaintext_servers
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
