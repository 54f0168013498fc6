"""A producer is closed in bounded time whatever its cluster does: confluent-kafka's close() flushes
and aborts without a time-out, which held a copy task for good once its target stopped answering."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from srm.kafka import clients
from tests.conftest import free_ports


def unanswered() -> Producer:
    """A producer whose cluster never answers (nothing listens on its port); its records wait for
    the whole default delivery time-out of 5 minutes."""
    [port] = free_ports(1)
    return Producer({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 0})


def test_a_producer_with_nothing_pending_is_closed() -> None:
    assert clients.close_producer(unanswered(), timeout_s=1.0) is True


def test_a_producer_whose_records_cannot_be_delivered_is_abandoned_within_its_bound() -> None:
    producer, reports = unanswered(), []
    for _ in range(100):
        producer.produce("t", b"v", partition=0, on_delivery=lambda error, _: reports.append(error.name()))
    started = time.monotonic()
    assert clients.close_producer(producer, timeout_s=0.5) is False
    assert time.monotonic() - started < 5  # the bound, not the records' 5-minute delivery time-out
    producer.poll(0.5)  # the purged records are reported as such, not left hanging
    assert reports and set(reports) <= {"_PURGE_QUEUE", "_PURGE_INFLIGHT"}, reports
