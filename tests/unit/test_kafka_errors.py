"""A denied operation on the data path names the principal, the resource and the operation to grant."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError
from pydantic import SecretStr

from srm.config.model import Cluster
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
        ({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"}, "the client certificate's principal"),
        ({"security.protocol": "SSL"}, "User:ANONYMOUS"),
    ],
)
def test_the_principal_is_named_as_the_brokers_see_it(client: dict[str, str], principal: str) -> None:
    assert Cluster(alias="east", bootstrap_servers="h:1", client=client).principal().startswith(principal)


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
