"""Local clusters: start, idempotence, port conflicts, stopping only what was started."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from srm.config import SrmConfig, parse_config
from srm.devenv.local import LocalClusters, LocalKafka
from srm.errors import LocalClusterError, PortInUseError
from srm.kafka import clients
from srm.kafka.probe import broker_answers
from srm.kafka.topics import ensure_topic, partition_counts
from tests.conftest import free_ports

pytestmark = pytest.mark.integration


def one_cluster(alias: str, port: int, controller: int, extra: str = "") -> SrmConfig:
    text = (
        f"clusters:\n  {alias}:\n    bootstrap.servers: 127.0.0.1:{port}\n"
        f"    local: {{controller.port: {controller}{extra}}}\n  other: {{bootstrap.servers: 'h:1'}}\n"
        f"flows:\n  - {{source: {alias}, target: other}}\n"
    )
    config, issues = parse_config(text, "one.yaml")
    assert not issues and config is not None
    return config


def test_session_clusters_answer(kafka: SrmConfig) -> None:
    for cluster in kafka.clusters[:2]:
        assert broker_answers(cluster.bootstrap_servers or "")


def test_up_is_idempotent_and_status_shows_pids(kafka: SrmConfig, kafka_config_path: Path) -> None:
    if not kafka.local_clusters():
        pytest.skip("running against existing clusters")
    clusters = LocalClusters(kafka.local_clusters(), kafka_config_path.parent)
    pids = [s.pid for s in clusters.states()]
    assert all(pids) and all(s.answering for s in clusters.states())
    lines = clusters.up()
    assert [line.split(":")[1].strip() for line in lines] == [
        "already running at 127.0.0.1",
        "already running at 127.0.0.1",
    ]
    assert [s.pid for s in clusters.states()] == pids


def test_port_in_use_names_port_and_cluster(tmp_path: Path) -> None:
    port, controller = free_ports(2)
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        config = one_cluster("eu-test", port, controller)
        with pytest.raises(PortInUseError) as err:
            LocalClusters(config.local_clusters(), tmp_path).up()
    assert f"cluster eu-test: broker port {port} on 127.0.0.1 is already in use by another process" in str(err.value)


def test_down_never_stops_a_process_it_did_not_start(tmp_path: Path) -> None:
    port, controller = free_ports(2)
    config = one_cluster("eu-test", port, controller)
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        member = LocalKafka("eu-test", config.cluster("eu-test").local, tmp_path)  # type: ignore[arg-type]
        member.home.mkdir(parents=True)
        member.pidfile.write_text(f"{stranger.pid}\n")  # a pid file pointing at someone else's process
        assert LocalClusters(config.local_clusters(), tmp_path).down() == ["eu-test: not running"]
        assert stranger.poll() is None, "a process srm did not start was killed"
        assert not member.pidfile.exists()
    finally:
        stranger.kill()
        stranger.wait()


def test_stop_and_restart_keep_the_data(tmp_path: Path) -> None:
    port, controller = free_ports(2)
    config = one_cluster("eu-test", port, controller)
    clusters = LocalClusters(config.local_clusters(), tmp_path)
    cluster = config.cluster("eu-test")
    try:
        assert clusters.up() == [f"eu-test: started at 127.0.0.1:{port} (pid {clusters.members[0].pid()})"]
        assert ensure_topic(clients.admin_client(cluster), "kept", 4)
        assert clusters.down() == ["eu-test: stopped"]
        assert not broker_answers(f"127.0.0.1:{port}", timeout_s=0.5)
        assert clusters.members[0].pid() is None
        clusters.up()
        assert partition_counts(clients.admin_client(cluster)).get("kept") == 4
    finally:
        clusters.down()


def test_invalid_server_setting_fails_with_kafkas_message(tmp_path: Path) -> None:
    port, controller = free_ports(2)
    config = one_cluster("eu-bad", port, controller, extra=", server: {num.network.threads: zero}")
    with pytest.raises(LocalClusterError) as err:
        LocalClusters(config.local_clusters(), tmp_path).up()
    message = str(err.value)
    assert message.startswith(f"cluster eu-bad: formatting {tmp_path}/kafka/eu-bad/data failed:")
    assert "num.network.threads" in message


def test_broker_that_exits_during_start_reports_its_log(tmp_path: Path) -> None:
    port, controller = free_ports(2)
    config = one_cluster("eu-bad", port, controller)
    clusters = LocalClusters(config.local_clusters(), tmp_path)
    data = clusters.members[0].data
    data.mkdir(parents=True)
    # A log dir that belongs to another node: the broker refuses it after starting up.
    (data / "meta.properties").write_text("version=1\ncluster.id=AAAAAAAAAAAAAAAAAAAAAA\nnode.id=7\n")
    try:
        with pytest.raises(LocalClusterError) as err:
            clusters.up()
    finally:
        clusters.down()
    message = str(err.value)
    assert "cluster eu-bad: the broker exited during start-up; last lines of" in message
    assert "Stored node id 7 doesn't match previous node id 1" in message


def test_cli_status(kafka_config_path: Path, kafka: SrmConfig) -> None:
    if not kafka.local_clusters():
        pytest.skip("running against existing clusters")
    script = Path(sys.executable).parent / "srm-control"
    env_base = {"SRM_LOCAL_DIR": str(kafka_config_path.parent), "PATH": str(Path(sys.executable).parent)}
    result = subprocess.run(
        [str(script), "local", "status", "--config", str(kafka_config_path)],
        capture_output=True,
        text=True,
        check=False,
        env=env_base,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["us-west", "us-east"]
    assert all(" running (pid " in line for line in lines)
