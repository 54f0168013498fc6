"""Local development clusters: single-node KRaft brokers on loopback, run from the Maven jars.

``make kafka-up`` / ``kafka-down`` / ``kafka-status`` and the test fixtures use this module. Each
cluster lives in ``<base>/kafka/<alias>/`` (``server.properties``, ``data/``, ``logs/``,
``broker.pid``). ``up`` is idempotent; ``down`` stops only a process whose pid file this module
wrote and whose command line names that cluster's ``server.properties``.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import subprocess
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from srm.config.model import Cluster, LocalBroker
from srm.devenv.jvm import kafka_command
from srm.devenv.local_security import (
    CERTIFICATE_USER,
    SECURED_PROTOCOLS,
    BrokerSecurity,
    client_login,
    client_setting,
    write_private,
)
from srm.errors import LocalClusterError, PortInUseError
from srm.kafka.probe import broker_answers

# A broker on this machine starts in 2-5 s; JIT warm-up on a loaded 2-core machine can take
# several times that, and formatting a fresh log dir adds a JVM start of its own.
START_TIMEOUT_S = 90.0
# A clean shutdown flushes logs and closes the metadata log; past this we SIGKILL.
STOP_TIMEOUT_S = 30.0
# A broker starts with its whole heap, as Kafka's kafka-server-start.sh starts one (-Xmx1G -Xms1G).
# Left to grow, G1 had kept it at 455 MiB while the broker's old generation grew, so its young
# generation shrank and its collections came ever more often under bench.latency's load: every
# 3.5 s, and every 1.1 s 45 minutes after the start. Each one is a burst of late records. Restarted
# with the whole heap, the broker collected every 12 s (bench/REPORT.md, "Latency"). Its pages are
# touched at the start too: with -Xms alone, the brokers' RSS climbed 17-31% an hour for two hours of
# bench.soak as G1 reached heap pages it had not used yet.
BROKER_HEAP = "1g"

# Dev-cluster settings. One node: every internal topic needs replication factor 1 and ISR 1.
# Fewer partitions for __consumer_offsets / __transaction_state than the production default of
# 50 make the first group commit and the first transaction start in well under a second.
BASE_SERVER_PROPERTIES = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "inter.broker.listener.name": "PLAINTEXT",
    "num.partitions": "1",
    "default.replication.factor": "1",
    "auto.create.topics.enable": "false",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "10",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "10",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
    "log.retention.check.interval.ms": "10000",
    # A controlled shutdown hands a broker's partitions to other replicas; one node has none, so it
    # leaves them leaderless while the node's transaction coordinator still runs, and the coordinator
    # skips the markers of a transaction it completes then ("likely deleted already"): the
    # transaction stays open on those partitions and read_committed readers stall at it for good.
    "controlled.shutdown.enable": "false",
    # A partition's offset and time indexes are files of this size, mapped into memory and sparse
    # until written. Where the disk reads ahead far (8 MiB on the VMs these clusters are measured
    # on; 128 KiB is common), the first write to a new index faults in and zero-fills that much:
    # 2 x ~10 ms of the broker's kernel time per new partition (perf: memset under
    # page_cache_ra_order), which at 1,000 new topics was most of a copy's time (bench/REPORT.md,
    # "Scale"). 256 KiB still indexes ~85 MB of a segment at the default 4 KiB interval; a segment
    # rolls once its index is full.
    "log.index.size.max.bytes": str(256 * 1024),
}


@dataclass(frozen=True)
class ClusterState:
    alias: str
    bootstrap: str
    pid: int | None
    answering: bool

    def __str__(self) -> str:
        if self.pid is None:
            return f"{self.alias:<10} {self.bootstrap:<18} stopped"
        state = "running" if self.answering else "NOT ANSWERING"
        return f"{self.alias:<10} {self.bootstrap:<18} {state} (pid {self.pid})"


class LocalKafka:
    """One local single-node cluster; ``cluster`` (its client user) is needed when it runs SASL_SSL."""

    security: BrokerSecurity | None

    def __init__(self, alias: str, broker: LocalBroker, base: Path, cluster: Cluster | None = None) -> None:
        self.alias = alias
        self.broker = broker
        self.cluster = cluster
        self.home = base / "kafka" / alias
        self.security = None
        if broker.security_protocol in SECURED_PROTOCOLS:
            self.security = BrokerSecurity(self.home, broker.host, broker.security_protocol)
        self.properties = self.home / "server.properties"
        self.data = self.home / "data"
        self.logs = self.home / "logs"
        self.pidfile = self.home / "broker.pid"
        self._process: subprocess.Popen[bytes] | None = None  # set when this object started the broker

    @property
    def bootstrap(self) -> str:
        return f"{self.broker.host}:{self.broker.port}"

    def server_properties(self) -> dict[str, str]:
        host, port, cport = self.broker.host, self.broker.port, self.broker.controller_port
        props = dict(BASE_SERVER_PROPERTIES)
        props.update(
            {
                "controller.quorum.voters": f"1@{host}:{cport}",
                "listeners": f"PLAINTEXT://{host}:{port},CONTROLLER://{host}:{cport}",
                "advertised.listeners": f"PLAINTEXT://{host}:{port}",
                "log.dirs": str(self.data),
            }
        )
        if self.security is not None:
            props.update(self.security.server_properties(port, cport, self._client_user()))
        props.update(self.broker.server)
        return props

    def _client_user(self) -> str:
        if self.security is not None and self.security.mtls:
            return CERTIFICATE_USER
        return client_setting(self._cluster(), "sasl.username")

    def _cluster(self) -> Cluster:
        if self.cluster is None:
            raise LocalClusterError(f"cluster {self.alias}: a SASL_SSL local cluster needs its client settings")
        return self.cluster

    def answers(self) -> bool:
        return broker_answers(self.bootstrap, settings=self.security.admin_settings() if self.security else None)

    def pid(self) -> int | None:
        """Pid of the broker this module started for this cluster, if it still runs."""
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            process = psutil.Process(pid)
            alive = process.status() != psutil.STATUS_ZOMBIE
            cmdline = process.cmdline() if alive else []
        except psutil.Error:
            return None
        return pid if str(self.properties) in cmdline else None

    def state(self) -> ClusterState:
        pid = self.pid()
        return ClusterState(self.alias, self.bootstrap, pid, pid is not None and self.answers())

    def start(self) -> bool:
        """Launch the broker unless it already runs; True if a process was started."""
        if self.pid() is not None:
            return False
        self.pidfile.unlink(missing_ok=True)
        for port, role in ((self.broker.port, "broker"), (self.broker.controller_port, "controller")):
            if port_in_use(self.broker.host, port):
                raise PortInUseError(
                    f"cluster {self.alias}: {role} port {port} on {self.broker.host} is already in use by "
                    f"another process (not a broker started by srm-control); stop that process or change "
                    f"clusters.{self.alias} (bootstrap.servers / local.controller.port) in the config"
                )
        self.logs.mkdir(parents=True, exist_ok=True)
        if self.security is not None:
            self.security.ensure()
        self._write_properties()
        if not (self.data / "meta.properties").exists():
            self._format()
        with open(self.logs / "stdout.log", "ab") as out:
            process = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pidfile.write_text(f"{process.pid}\n")
        self._process = process
        return True

    def command(self) -> list[str]:
        """The broker's command line."""
        return kafka_command("kafka.Kafka", str(self.properties), heap=BROKER_HEAP, resident=True, logs_dir=self.logs)

    def _write_properties(self) -> None:
        # A secured broker's file holds its store and admin passwords: readable by this user only.
        write_private(self.properties, "".join(f"{k}={v}\n" for k, v in self.server_properties().items()))

    def _format(self) -> None:
        arguments = ["format", "-t", new_cluster_id(), "-c", str(self.properties)]
        if self.security is not None:
            arguments += self.security.format_arguments()
        command = kafka_command("kafka.tools.StorageTool", *arguments, logs_dir=self.logs)
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise LocalClusterError(
                f"cluster {self.alias}: formatting {self.data} failed:\n{result.stdout}{result.stderr}"
            )

    def wait_until_answering(self, deadline: float) -> None:
        while time.monotonic() < deadline:
            if not self._alive():
                raise LocalClusterError(
                    f"cluster {self.alias}: the broker exited during start-up; last lines of "
                    f"{self.logs / 'server.log'}:\n{self.log_tail()}"
                )
            if self.answers():
                self._create_client_user()
                return
            time.sleep(0.3)
        raise LocalClusterError(
            f"cluster {self.alias}: broker at {self.bootstrap} did not answer within {START_TIMEOUT_S:.0f} s; "
            f"see {self.logs / 'server.log'}"
        )

    def _create_client_user(self) -> None:
        if self.security is not None and not self.security.mtls:
            user, password = client_login(self._cluster())
            self.security.upsert_user(self.bootstrap, user, password, self.alias)

    def _alive(self) -> bool:
        # Right after fork the child's command line is still ours, so judge our own child by
        # its process handle rather than by pid file and command line.
        if self._process is not None:
            return self._process.poll() is None
        return self.pid() is not None

    def stop(self) -> bool:
        """Stop the broker this module started; True if there was one."""
        pid = self.pid()
        if pid is None:
            self.pidfile.unlink(missing_ok=True)  # stale: that process is gone or is not ours
            return False
        with contextlib.suppress(psutil.NoSuchProcess):
            process = psutil.Process(pid)
            process.terminate()
            try:  # a child of ours (tests start brokers in-process) is reaped by the wait
                process.wait(STOP_TIMEOUT_S)
            except psutil.TimeoutExpired:
                process.kill()
                process.wait(STOP_TIMEOUT_S)
        self.pidfile.unlink(missing_ok=True)
        self._process = None
        return True

    def log_tail(self, lines: int = 15) -> str:
        for name in ("server.log", "stdout.log"):
            path = self.logs / name
            if path.exists() and path.stat().st_size:
                return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log output)"


class LocalClusters:
    """The local clusters of a configuration, started and stopped together."""

    def __init__(self, clusters: Iterable[Cluster], base: Path) -> None:
        self.members = [LocalKafka(c.alias, c.local, base, c) for c in clusters if c.local is not None]

    def up(self) -> list[str]:
        """Start every cluster that is not running and wait until all answer; idempotent."""
        started = [m.start() for m in self.members]
        deadline = time.monotonic() + START_TIMEOUT_S
        for member in self.members:
            member.wait_until_answering(deadline)
        return [
            f"{m.alias}: {'started' if new else 'already running'} at {m.bootstrap} (pid {m.pid()})"
            + (m.security.summary() if m.security else "")
            for m, new in zip(self.members, started, strict=True)
        ]

    def down(self) -> list[str]:
        return [f"{m.alias}: {'stopped' if m.stop() else 'not running'}" for m in self.members]

    def states(self) -> list[ClusterState]:
        return [m.state() for m in self.members]


def port_in_use(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Connections of a broker that just stopped linger in TIME_WAIT; the broker binds with
        # SO_REUSEADDR and starts fine, so only a socket actually bound to the port counts.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def new_cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes, URL-safe base64 without padding, not starting with '-'."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id
