"""Is a Kafka cluster there? Quick checks that log nothing and never hang."""

from __future__ import annotations

import logging
import socket
from typing import Any

_quiet = logging.getLogger("srm.kafka.probe")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def broker_answers(bootstrap: str, timeout_s: float = 2.0, settings: dict[str, Any] | None = None) -> bool:
    """True when a broker at ``bootstrap`` accepts a connection and returns cluster metadata;
    ``settings``: extra client settings (security) for a secured broker."""
    host, _, port = bootstrap.split(",", maxsplit=1)[0].rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            pass
    except OSError:
        return False
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    client: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "logger": _quiet,
        "socket.timeout.ms": int(timeout_s * 1000),
        **(settings or {}),
    }
    admin = AdminClient(client)
    try:
        return bool(admin.list_topics(timeout=timeout_s).brokers)
    except KafkaException:
        return False
