"""Shared fixtures: one pair of real Kafka clusters per test session, unique names per test.

By default the session starts two single-node KRaft brokers (``us-west``, ``us-east``) on free
loopback ports in a temporary folder, with the same code as ``make kafka-up``, and stops them at
the end. ``SRM_TEST_CONFIG=conf/srm.yaml`` (after ``make kafka-up``) runs the tests against
clusters that are already running instead.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig, load_config
from srm.devenv.local import LocalClusters
from srm.kafka.probe import broker_answers
from tests.jobs import Job
from tests.secured import SIDES, SecuredCluster, local_brokers
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
storage: {{warehouse: {base}/warehouse, plan_logs: {base}/plan-logs}}
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


_HANDED_OUT: set[int] = set()
# make test runs the tests in two processes (pytest-xdist, -n 2): each hands out only the ports of
# its own residue, so neither can give a port the other handed out before a server bound it. By the
# half port: Linux offers odd ports to bind(0) (even ones are kept for connect), so the port's own
# residue would leave one process none.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


def free_ports(count: int) -> list[int]:
    """Ports free now and never handed out before in this session. A server told a port binds it
    only once it has started (Airflow's API server: tens of seconds); meanwhile the system may offer
    the same port again, and a second server given it answered the first one's requests (a Spark
    master's UI port that the Airflow API server took)."""
    ports: list[int] = []
    for _ in range(100_000):
        if len(ports) == count:
            return ports
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in _HANDED_OUT and (port >> 1) % _WORKERS == _WORKER:
            _HANDED_OUT.add(port)
            ports.append(port)
    raise RuntimeError(f"free_ports: {len(ports)} of {count} ports of worker {_WORKER} of {_WORKERS} found")


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
    # The session's own warehouse: a test session beside it (make test runs two) has flows of the same names.
    text = TEST_CONFIG.format(authorizer=AUTHORIZER, base=base, **{f"p{i}": port for i, port in enumerate(ports)})
    path.write_text(text)
    clusters = LocalClusters(load_config(path).local_clusters(), base)
    try:
        clusters.up()
        yield path
    finally:
        clusters.down()


@contextlib.contextmanager
def own_cluster(base: Path, alias: str, server: dict[str, Any] | None = None) -> Iterator[LocalClusters]:
    """One more single-broker local cluster in ``base`` (``server``: broker settings), up until the end."""
    import yaml

    port, controller = free_ports(2)
    local: dict[str, Any] = {"controller.port": controller, **({"server": server} if server else {})}
    path = base / "cluster.yaml"
    path.write_text(yaml.safe_dump({"clusters": {alias: {"bootstrap.servers": f"127.0.0.1:{port}", "local": local}}}))
    running = LocalClusters(load_config(path).local_clusters(), base)
    running.up()
    try:
        yield running
    finally:
        running.down()


@pytest.fixture(scope="module")
def freezable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalClusters]:
    """A cluster of the test module's own, to freeze (SIGSTOP) as a partitioned data centre looks."""
    with own_cluster(tmp_path_factory.mktemp("freezable"), "freezable") as running:
        yield running


def bootstrap(running: LocalClusters) -> str:
    [member] = running.members
    return f"127.0.0.1:{member.broker.port}"


def broker_pid(running: LocalClusters) -> int:
    [member] = running.members
    pid = member.pid()
    assert pid is not None, "the module's broker is not running"
    return pid


@pytest.fixture(scope="session")
def kafka(kafka_config_path: Path) -> SrmConfig:
    """The session's configuration; ``kafka.clusters[0]``/``[1]`` are running."""
    return load_config(kafka_config_path)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One Spark session for every in-process replication run of the test session."""
    from srm.spark.session import build_session

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
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, SecuredCluster]]:
    """Two SASL_SSL brokers, ``west`` and ``east`` (SCRAM-SHA-512, StandardAuthorizer, a CA each), started
    by the first test that asks, for the rest of the session; their client user is ``replicator``."""
    base = tmp_path_factory.mktemp("secured-kafka")
    ports = free_ports(4)
    clusters = {
        side: {
            "bootstrap.servers": f"127.0.0.1:{ports[2 * i]}",
            "local": {"security.protocol": "SASL_SSL", "controller.port": ports[2 * i + 1]},
            "client": {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "replicator",
                "sasl.password": REFERENCE,  # the password: os.environ, above
                "ssl.ca.location": str(base / "kafka" / side / "security" / "ca.pem"),
            },
        }
        for i, side in enumerate(SIDES)
    }
    with local_brokers(base, clusters) as pair:
        yield pair


@pytest.fixture(scope="session")
def mtls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredCluster]:
    """A broker that wants client certificates its CA signed (mTLS, StandardAuthorizer), started by the
    first test that asks; its client settings are those of the certificate of ``User:replicator``."""
    base = tmp_path_factory.mktemp("mtls-kafka")
    port, controller = free_ports(2)
    security = base / "kafka" / "mtls" / "security"
    client = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(security / "ca.pem"),
        "ssl.certificate.location": str(security / "client.pem"),
        "ssl.key.location": str(security / "client.key"),
    }
    cluster = {
        "bootstrap.servers": f"127.0.0.1:{port}",
        "local": {"security.protocol": "SSL", "controller.port": controller},
        "client": client,
    }
    with local_brokers(base, {"mtls": cluster}) as brokers:
        yield brokers["mtls"]


Run = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Run:
    """``cli(config, *args)`` runs srm-control in this process: (exit code, stdout, stderr)."""
    from srm.control.cli import main as srm_control

    def run(config: Path, *args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = srm_control([*args[:1], "--config", str(config), *args[1:]])
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(autouse=True)
def no_job_outlives_its_test() -> Iterator[None]:
    yield
    Job.kill_leftovers()


@pytest.fixture
def unique() -> Callable[[str], str]:
    """Names no other test uses: ``unique("orders")`` -> ``orders-3f9a1c2b``."""
    token = uuid.uuid4().hex[:8]
    return lambda prefix: f"{prefix}-{token}"
