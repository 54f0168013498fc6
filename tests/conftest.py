"""Shared fixtures: one pair of real Kafka clusters per test session, unique names per test.

By default the session starts two single-node KRaft brokers (``us-west``, ``us-east``) on free
loopback ports in a temporary folder, with the same code as ``make kafka-up``, and stops them at
the end. ``SRM_TEST_CONFIG=conf/srm.yaml`` (after ``make kafka-up``) runs the tests against
clusters that are already running instead.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from srm.config import SrmConfig, load_config
from srm.local import LocalClusters
from srm.probe import broker_answers
from tests.jobs import Job
from tests.spark_cluster import StandaloneCluster

EXISTING_CLUSTERS_ENV = "SRM_TEST_CONFIG"
TEST_CONFIG = """\
# Written by tests/conftest.py for one test session.
defaults:
  replication.factor: 1
  heartbeats.topic.replication.factor: 1
  checkpoints.topic.replication.factor: 1
  offset-syncs.topic.replication.factor: 1
clusters:
  us-west:
    bootstrap.servers: 127.0.0.1:{p0}
    local: {{controller.port: {p1}, server: {authorizer}}}
  us-east:
    bootstrap.servers: 127.0.0.1:{p2}
    local: {{controller.port: {p3}, server: {authorizer}}}
flows:
  - {{source: us-west, target: us-east}}
  - {{source: us-east, target: us-west}}
"""
# ACLs work (ACL sync is tested) while every client, as User:ANONYMOUS on PLAINTEXT, may do anything.
AUTHORIZER = (
    "{authorizer.class.name: org.apache.kafka.metadata.authorizer.StandardAuthorizer, super.users: User:ANONYMOUS}"
)


# The SASL password of the secured test cluster (tests/integration/test_secured_flow.py). Flows name it
# as ${env:SRM_TEST_SASL_PASSWORD}; the Spark workers have it in their environment, as a secret that
# an operator puts on the hosts, so the executors resolve the reference and no value travels.
SASL_PASSWORD_ENV = "SRM_TEST_SASL_PASSWORD"
SASL_PASSWORD = f"pw-{uuid.uuid4().hex}"
# In this process's environment from the start, as on an operator's hosts: the local Spark session's
# Python workers (forked from a daemon that inherits the environment its JVM started with) resolve it.
os.environ[SASL_PASSWORD_ENV] = SASL_PASSWORD
REFERENCE = f"${{env:{SASL_PASSWORD_ENV}}}"


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


@pytest.fixture(scope="session")
def kafka_config_path(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Path of a config whose first two clusters run for the whole session."""
    existing = os.environ.get(EXISTING_CLUSTERS_ENV)
    if existing:
        config = load_config(existing)
        for cluster in config.clusters[:2]:
            if not broker_answers(cluster.bootstrap_servers or ""):
                pytest.fail(f"{EXISTING_CLUSTERS_ENV}={existing}: cluster {cluster.alias} does not answer")
        yield Path(existing)
        return
    base = tmp_path_factory.mktemp("kafka")
    path = base / "srm-test.yaml"
    ports = free_ports(4)
    path.write_text(TEST_CONFIG.format(authorizer=AUTHORIZER, **{f"p{i}": port for i, port in enumerate(ports)}))
    clusters = LocalClusters(load_config(path).local_clusters(), base)
    try:
        clusters.up()
        yield path
    finally:
        clusters.down()


@pytest.fixture(scope="session")
def kafka(kafka_config_path: Path) -> SrmConfig:
    """The session's configuration; ``kafka.clusters[0]``/``[1]`` are running."""
    return load_config(kafka_config_path)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One Spark session for every in-process replication run of the test session."""
    from srm.sparkapp import build_session

    session = build_session(
        "srm-tests", "local[2, 4]", {"spark.ui.enabled": "false", "spark.python.worker.faulthandler.enabled": "true"}
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A Spark standalone cluster (a master, two workers of 2 cores that cannot see the checkout),
    started by the first test that asks for it, for the rest of the session."""
    folder, ports = tmp_path_factory.mktemp("spark-standalone"), free_ports(4)
    standalone = StandaloneCluster(folder, ports, environment={SASL_PASSWORD_ENV: SASL_PASSWORD})
    try:
        standalone.start()
        yield standalone
    finally:
        standalone.stop()


@pytest.fixture(scope="session")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str], Path]]:
    """A SASL_SSL broker (SCRAM-SHA-512, StandardAuthorizer) of the session, started by the first test that
    asks: its bootstrap, the client settings of its (super) user, its folder."""
    base = tmp_path_factory.mktemp("secured-kafka")
    port, controller = free_ports(2)
    client = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "replicator",
        "sasl.password": REFERENCE,
        "ssl.ca.location": str(base / "kafka" / "secured" / "security" / "ca.pem"),
    }
    bootstrap = f"127.0.0.1:{port}"
    cluster = {
        "bootstrap.servers": bootstrap,
        "local": {"security.protocol": "SASL_SSL", "controller.port": controller},
        "client": client,
    }
    path = base / "srm.yaml"
    path.write_text(yaml.safe_dump({"clusters": {"secured": cluster}, "flows": []}))
    clusters = LocalClusters(load_config(path).local_clusters(), base)  # the password: os.environ, above
    try:
        clusters.up()
        # The Spark workers cannot see this folder: the CA travels as PEM text, not as a path.
        ca = Path(client.pop("ssl.ca.location")).read_text()
        yield bootstrap, {**client, "ssl.ca.pem": ca}, base
    finally:
        clusters.down()


@pytest.fixture(autouse=True)
def no_job_outlives_its_test() -> Iterator[None]:
    yield
    Job.kill_leftovers()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Names no other test uses: ``unique("orders")`` -> ``orders-3f9a1c2b``."""
    token = uuid.uuid4().hex[:8]
    return lambda prefix: f"{prefix}-{token}"
