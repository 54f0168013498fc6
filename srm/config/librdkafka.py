"""Ask librdkafka itself whether a client setting exists and its value parses.

Building a client with one setting and no bootstrap servers opens no connection; librdkafka
rejects unknown names and unparsable values right there, in its own words. Settings that are
valid only in combination (SASL needs a username) are judged when the real client is built.
"""

from __future__ import annotations

import logging

from srm.config.secrets import REFERENCE

_quiet = logging.getLogger("srm.librdkafka-check")
_quiet.addHandler(logging.NullHandler())
_quiet.propagate = False


def setting_problem(key: str, value: str) -> str | None:
    """librdkafka's complaint about ``key: value``, or None if it accepts the setting."""
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({key: value, "logger": _quiet})
    except KafkaException as exc:
        message = str(exc.args[0].str())
        if message.startswith("Failed to create producer"):
            return None  # needs other settings too; not a problem of this one
        if message.startswith("Invalid value") and REFERENCE.search(value):
            return None  # resolved later from the environment or a file
        return f"librdkafka rejects {key!r}: {message}"
    return None
