"""Local cluster settings and helpers that need no broker."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from srm.config.model import LocalBroker
from srm.local import LocalKafka, new_cluster_id, port_in_use


def test_server_properties_for_a_single_node_kraft_broker(tmp_path: Path) -> None:
    broker = LocalBroker(host="127.0.0.1", port=19092, controller_port=19093, server={"log.retention.ms": "60000"})
    props = LocalKafka("us-west", broker, tmp_path).server_properties()
    assert props["process.roles"] == "broker,controller"
    assert props["controller.quorum.voters"] == "1@127.0.0.1:19093"
    assert props["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert props["log.dirs"] == str(tmp_path / "kafka" / "us-west" / "data")
    assert props["offsets.topic.replication.factor"] == props["transaction.state.log.min.isr"] == "1"
    assert props["auto.create.topics.enable"] == "false"
    assert props["log.retention.ms"] == "60000"  # extra settings from `local.server`


def test_cluster_ids_are_kraft_uuids() -> None:
    ids = {new_cluster_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids)


def test_port_in_use() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert port_in_use("127.0.0.1", port)
    assert not port_in_use("127.0.0.1", port)
