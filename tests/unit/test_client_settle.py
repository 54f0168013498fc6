"""A new client is handed out once a broker it learned of answered it (srm.kafka.clients.settled)."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from srm.kafka import clients
from tests.conftest import free_ports


class Answers:
    """A client whose metadata comes from the brokers ``origins`` name, one call after another
    (-1: the bootstrap address), or fails with ``error`` once they are used up."""

    def __init__(self, *origins: int, error: KafkaException | None = None) -> None:
        self.origins, self.error, self.calls = list(origins), error, 0

    def list_topics(self, timeout: float) -> Any:
        self.calls += 1
        if not self.origins and self.error is not None:
            raise self.error
        return SimpleNamespace(orig_broker_id=self.origins.pop(0))


def test_the_client_is_asked_again_until_a_learned_broker_answers() -> None:
    client = Answers(-1, -1, 3, 3)

    assert clients.settled(client) is client
    assert client.calls == 3


def test_an_error_hands_the_client_out_at_once_for_its_first_call_to_report() -> None:
    client = Answers(-1, error=KafkaException(KafkaError(KafkaError._TRANSPORT, "down", retriable=True)))

    assert clients.settled(client) is client
    assert client.calls == 2


def test_a_cluster_that_does_not_answer_costs_a_new_client_the_bound_and_no_error() -> None:
    (port,) = free_ports(1)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    started = time.monotonic()

    assert clients.settled(admin, timeout_s=0.5) is admin
    assert time.monotonic() - started < 5
