"""The demo's data step against the session clusters: 1,000 records with headers, shown per cluster."""

from __future__ import annotations

import pytest

from srm.config import SrmConfig
from srm.devenv.demo import DEMO_PARTITIONS, DEMO_RECORDS, DEMO_TOPIC, produce_demo_data, show_clusters
from srm.kafka import clients
from tests.helpers import read_all

pytestmark = pytest.mark.integration


def test_demo_creates_topic_with_records_and_shows_counts(kafka: SrmConfig, capsys: pytest.CaptureFixture[str]) -> None:
    source = kafka.clusters[0]
    produce_demo_data(source)
    assert produce_demo_data(source) == 0  # a second run produces nothing
    records = read_all(source, DEMO_TOPIC, DEMO_RECORDS)
    assert len(records) == DEMO_RECORDS
    assert {m.partition() for m in records} == set(range(DEMO_PARTITIONS))
    assert all(m.headers() == [("source", b"demo"), ("schema", b"order-v1")] for m in records)
    if kafka.local_clusters():
        show_clusters(kafka)
        out = capsys.readouterr().out
        assert f"  {DEMO_TOPIC} ({DEMO_PARTITIONS} partitions, {DEMO_RECORDS} records)" in out
        assert out.startswith(f"{source.alias} ({source.bootstrap_servers}):")
    clients.admin_client(source).delete_topics([DEMO_TOPIC])
