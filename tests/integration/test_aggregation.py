"""Aggregation (SRM's "many clusters into one"): three source clusters replicating into one target,
each flow its own continuous job, all at once. Every record exactly once, in order, under the
source's alias on the target; the flows' internal topics and transactional ids never meet."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from srm.config import SrmConfig, load_config
from srm.config.model import Cluster
from srm.devenv.local import LocalClusters
from srm.kafka import clients
from srm.kafka.topics import ensure_topic, partition_counts
from tests.conftest import free_ports
from tests.integration.test_replicate_continuous import wait_for
from tests.jobs import Job, Writer
from tests.replication import SINGLE_BROKER, contents, count_records, sequence_report

pytestmark = pytest.mark.integration

PARTITIONS = 3
TOPICS = 2  # per source cluster
CLEAN = {"missing": 0, "duplicated": 0, "out_of_order": 0}


@pytest.fixture(scope="module")
def two_more(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Two more local clusters, started for this module: their bootstrap servers by name."""
    base = tmp_path_factory.mktemp("aggregation")
    ports = free_ports(4)
    clusters = {
        name: {"bootstrap.servers": f"127.0.0.1:{ports[2 * i]}", "local": {"controller.port": ports[2 * i + 1]}}
        for i, name in enumerate(("north", "south"))
    }
    path = base / "clusters.yaml"
    path.write_text(yaml.safe_dump({"clusters": clusters}))
    running = LocalClusters(load_config(path).local_clusters(), base)
    running.up()
    try:
        yield {name: str(c["bootstrap.servers"]) for name, c in clusters.items()}
    finally:
        running.down()


def aggregation(
    kafka: SrmConfig, two_more: dict[str, str], tmp: Path, topics: list[str]
) -> tuple[Path, list[str], str]:
    """A config of three sources (the session's west and the module's two) each with a continuous
    flow of ``topics`` into the session's east: (its path, the source aliases, the target alias)."""
    token = uuid.uuid4().hex[:6]
    target = f"agg{token}"
    sources = {
        f"west{token}": kafka.clusters[0].bootstrap_servers,
        **{f"{name}{token}": servers for name, servers in two_more.items()},
    }
    data = {
        "defaults": SINGLE_BROKER,
        "clusters": {
            **{alias: {"bootstrap.servers": servers} for alias, servers in sources.items()},
            target: {"bootstrap.servers": kafka.clusters[1].bootstrap_servers},
        },
        "flows": [{"source": a, "target": target, "topics": topics, "task.lease.seconds": 10} for a in sources],
        "storage": {"warehouse": str(tmp / "warehouse"), "plan_logs": str(tmp / "plan-logs")},
    }
    path = tmp / "srm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, list(sources), target


def remote_records(target: Cluster, remote: str) -> int:
    if remote not in partition_counts(clients.admin_client(target)):
        return 0
    return count_records(target, remote)


def copy_all_at_once(config: SrmConfig, path: Path, writers: list[Writer], target: str) -> dict[Writer, int]:
    """Each source's flow as a job of its own, all running at once, until the target holds what the
    writers sent; what each sent."""
    sources = sorted({w.cluster.alias for w in writers})
    jobs = [Job(path, alias, target, path.parent / f"{alias}.log", master="local[2, 4]") for alias in sources]
    try:
        for writer in writers:  # every flow copies while all of them run
            remote = remote_of(config, writer, target)
            wait_for(lambda: remote_records(config.cluster(target), remote) > 0, 180, remote)  # noqa: B023
        for job in jobs:
            assert job.process.poll() is None, job.text()[-3000:]
        sent = {writer: writer.stop() for writer in writers}
        for writer, count in sent.items():
            remote = remote_of(config, writer, target)
            wait_for(lambda: remote_records(config.cluster(target), remote) >= count, 180, f"{remote} caught up")  # noqa: B023
        for job in jobs:
            assert job.stop() == 0, job.text()[-3000:]
    finally:
        for writer in writers:
            writer.halt.set()
        for job in jobs:
            if job.process.poll() is None:
                job.process.kill()
    return sent


def remote_of(config: SrmConfig, writer: Writer, target: str) -> str:
    source = writer.cluster.alias
    return config.flow(source, target).policy.format_remote_topic(source, writer.topic)


def test_three_sources_into_one_target_at_once_every_record_once(
    kafka: SrmConfig, two_more: dict[str, str], tmp_path: Path, unique: Callable[[str], str]
) -> None:
    topics = [unique(f"agg{i}") for i in range(TOPICS)]  # the same names on every source
    path, sources, target = aggregation(kafka, two_more, tmp_path, topics)
    config = load_config(path)
    writers = []
    for alias in sources:
        for topic in topics:
            ensure_topic(clients.admin_client(config.cluster(alias)), topic, PARTITIONS)
            writers.append(Writer(config.cluster(alias), topic, PARTITIONS, burst=30))
    for writer in writers:
        writer.start()
    sent = copy_all_at_once(config, path, writers, target)
    for writer, count in sent.items():
        expected = {p: [s for s in range(count) if s % PARTITIONS == p] for p in range(PARTITIONS)}
        found = contents(config.cluster(target), remote_of(config, writer, target))
        assert sequence_report(found, expected) == CLEAN, (writer.cluster.alias, writer.topic)
    # The same topic name from three clusters: each under its own source's alias on the target.
    remotes = {remote_of(config, writer, target) for writer in writers}
    assert len(remotes) == len(sources) * TOPICS
    assert remotes <= set(partition_counts(clients.admin_client(config.cluster(target))))
