"""Local cluster settings and helpers that need no broker."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from srm.config.model import Cluster, LocalBroker
from srm.devenv.local import LocalKafka, new_cluster_id, port_in_use
from srm.errors import LocalClusterError


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


@pytest.mark.usefixtures("no_jvm")
def test_a_broker_starts_with_its_whole_heap_as_kafka_server_start_does(tmp_path: Path) -> None:
    broker = LocalBroker(host="127.0.0.1", port=19092, controller_port=19093)
    command = LocalKafka("us-west", broker, tmp_path).command()
    assert "-Xms1g" in command and "-Xmx1g" in command and "-XX:+AlwaysPreTouch" in command
    assert command.index("-Xms1g") < command.index("kafka.Kafka")  # a JVM option, not an argument


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


def test_a_sasl_ssl_broker_authenticates_and_authorizes_every_client(tmp_path: Path) -> None:
    broker = LocalBroker(host="127.0.0.1", port=39092, controller_port=39093, security_protocol="SASL_SSL")
    cluster = Cluster(alias="secured", client={"sasl.username": "replicator"})
    member = LocalKafka("secured", broker, tmp_path, cluster)
    assert member.security is not None
    member.security.ensure()
    props = member.server_properties()
    assert props["listeners"] == "SASL_SSL://127.0.0.1:39092,CONTROLLER://127.0.0.1:39093"
    assert props["advertised.listeners"] == "SASL_SSL://127.0.0.1:39092"
    assert props["sasl.enabled.mechanisms"] == props["sasl.mechanism.inter.broker.protocol"] == "SCRAM-SHA-512"
    assert props["authorizer.class.name"].endswith("StandardAuthorizer")
    assert props["super.users"] == "User:admin;User:ANONYMOUS;User:replicator"
    folder = tmp_path / "kafka" / "secured" / "security"
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert sorted(p.name for p in folder.iterdir()) == [
        "admin.password",
        "broker.p12",
        "broker.p12.password",
        "ca.key",
        "ca.pem",
    ]
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in folder.iterdir() if p.name != "ca.pem")
    ca = x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes())
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    password = (folder / "broker.p12.password").read_text().encode()
    _, cert, chain = pkcs12.load_key_and_certificates((folder / "broker.p12").read_bytes(), password)
    assert cert is not None and cert.issuer == ca.subject and chain == [ca]
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in names.get_values_for_type(x509.DNSName)
    assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def test_a_sasl_ssl_broker_needs_its_client_user(tmp_path: Path) -> None:
    broker = LocalBroker(host="127.0.0.1", port=39092, controller_port=39093, security_protocol="SASL_SSL")
    member = LocalKafka("secured", broker, tmp_path, Cluster(alias="secured"))
    member.security.ensure()  # type: ignore[union-attr]
    with pytest.raises(
        LocalClusterError, match=r"cluster secured: a SASL_SSL local cluster needs client\.sasl\.username"
    ):
        member.server_properties()


def test_an_mtls_broker_wants_a_certificate_its_ca_signed_and_maps_its_cn_to_the_principal(tmp_path: Path) -> None:
    broker = LocalBroker(host="127.0.0.1", port=39092, controller_port=39093, security_protocol="SSL")
    member = LocalKafka("mtls", broker, tmp_path, Cluster(alias="mtls"))
    assert member.security is not None and member.security.mtls
    member.security.ensure()
    props = member.server_properties()
    assert props["listeners"] == "SSL://127.0.0.1:39092,CONTROLLER://127.0.0.1:39093"
    assert props["inter.broker.listener.name"] == "SSL" and props["ssl.client.auth"] == "required"
    assert props["super.users"] == "User:127.0.0.1;User:ANONYMOUS;User:replicator"
    assert "sasl.enabled.mechanisms" not in props and member.security.format_arguments() == []
    folder = tmp_path / "kafka" / "mtls" / "security"
    assert sorted(p.name for p in folder.iterdir()) == [
        "broker.p12",
        "broker.p12.password",
        "ca.key",
        "ca.pem",
        "client.key",
        "client.pem",
    ]
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in folder.iterdir() if p.suffix == ".key")
    ca = x509.load_pem_x509_certificate((folder / "ca.pem").read_bytes())
    chain = x509.load_pem_x509_certificates((folder / "client.pem").read_bytes())
    assert [c.subject.rfc4514_string() for c in chain] == ["CN=replicator", ca.subject.rfc4514_string()]
    chain[0].verify_directly_issued_by(ca)
    other, key = member.security.issue_client("auditor")
    assert x509.load_pem_x509_certificates(other.encode())[0].subject.rfc4514_string() == "CN=auditor"
    assert "PRIVATE KEY" in key
