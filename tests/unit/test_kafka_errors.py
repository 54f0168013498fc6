"""A denied operation on the data path names the principal, the resource and the operation to grant."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from pydantic import SecretStr

from srm.config.model import Cluster
from srm.devenv.local_security import BrokerSecurity
from srm.errors import RemoteTopicGoneError
from srm.replication.kafka_errors import read_error, write_error

SCRAM = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "replicator"}


@pytest.mark.parametrize(
    ("client", "principal"),
    [
        ({}, "User:ANONYMOUS (clusters.east: no authentication)"),
        (SCRAM, "User:replicator (clusters.east)"),
        ({**SCRAM, "sasl.mechanism": "PLAIN"}, "User:replicator (clusters.east)"),
        ({**SCRAM, "sasl.username": SecretStr("x")}, "the SASL user (sasl.username) of clusters.east"),
        ({**SCRAM, "sasl.mechanism": "OAUTHBEARER"}, "the OAUTHBEARER principal of clusters.east"),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/c"}, "the principal of the client certificate ("),
        ({"security.protocol": "SSL"}, "User:ANONYMOUS"),
    ],
)
def test_the_principal_is_named_as_the_brokers_see_it(client: dict[str, str], principal: str) -> None:
    assert Cluster(alias="east", bootstrap_servers="h:1", client=client).principal().startswith(principal)


def test_the_principal_of_a_client_certificate_names_its_subject(tmp_path: Path) -> None:
    security = BrokerSecurity(tmp_path, "127.0.0.1", "SSL")
    security.ensure()
    certificate, _ = security.issue_client("auditor")
    for client in (
        {"security.protocol": "SSL", "ssl.certificate.pem": certificate},
        {"security.protocol": "SSL", "ssl.certificate.location": str(security.client_certificate)},
    ):
        subject = "CN=auditor" if "ssl.certificate.pem" in client else "CN=replicator"
        principal = Cluster(alias="east", bootstrap_servers="h:1", client=client).principal()
        assert principal == f"the principal of the client certificate {subject} (clusters.east)"


def denied(code: int, remote_prefix: str = "west.") -> str:
    west = Cluster(alias="west", bootstrap_servers="h:1", client=SCRAM | {"sasl.username": "reader"})
    east = Cluster(alias="east", bootstrap_servers="h:2", client=SCRAM)
    where = {"target_topic": "west.orders", "partition": 3, "topic": "orders", "offset": 42, "size": 10}
    return str(
        write_error(KafkaError(code), target_cluster=east, source_cluster=west, remote_prefix=remote_prefix, **where)
    )


def test_a_denied_write_names_principal_topic_and_operation() -> None:
    message = denied(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert (
        "not authorized to write topic 'west.orders' on east (copying topic 'orders' partition 3 offset 42" in message
    )
    assert "User:replicator (clusters.east) needs WRITE on TOPIC 'west.orders'" in message
    assert "PREFIXED 'west.'" in message
    assert "PREFIXED" not in denied(KafkaError.TOPIC_AUTHORIZATION_FAILED, remote_prefix="")  # identity policy


def test_a_denied_transactional_id_names_the_flows_prefix() -> None:
    message = denied(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    assert "User:replicator (clusters.east) needs WRITE on TRANSACTIONAL_ID PREFIXED 'srm-replicate.west.east.'" in (
        message
    )


def test_a_denied_read_names_the_source_principal_topic_and_operation() -> None:
    west = Cluster(alias="west", bootstrap_servers="h:1", client=SCRAM | {"sasl.username": "reader"})
    message = str(
        read_error(
            KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED),
            source_cluster=west,
            topic="orders",
            partition=1,
            offset=7,
        )
    )
    assert message == (
        "not authorized to read topic 'orders' partition 1 at offset 7 on west: "
        "User:reader (clusters.west) needs READ on TOPIC 'orders'"
    )


@pytest.mark.parametrize("code", [KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC])
def test_a_remote_topic_gone_from_the_target_ends_the_run_saying_what_the_next_one_does(code: int) -> None:
    west = Cluster(alias="west", bootstrap_servers="h:1")
    east = Cluster(alias="east", bootstrap_servers="h:2")
    where = {"target_topic": "west.orders", "partition": 3, "topic": "orders", "offset": 42, "size": 10}
    error = write_error(KafkaError(code), target_cluster=east, source_cluster=west, remote_prefix="west.", **where)
    assert isinstance(error, RemoteTopicGoneError)  # a lasting fault: Spark does not retry the task
    message = str(error)
    assert message.startswith("remote topic 'west.orders' partition 3 is gone from east (deleted while the flow ")
    assert "copied topic 'orders' partition 3 offset 42 on west into it" in message
    assert "stops (fail) or creates it again and copies on from the committed progress (continue)" in message


def test_a_timestamp_the_target_refuses_names_the_topic_configs_that_do() -> None:
    message = denied(KafkaError.INVALID_TIMESTAMP)
    assert "message.timestamp.before.max.ms and message.timestamp.after.max.ms of 'west.orders'" in message
    assert "take 'orders' out of the flow" in message
