"""Which topic configs travel from a source topic to its remote topic (MM2's rules).

Copied: settings that are neither read-only nor sensitive, and not matched by
``config.properties.exclude``; with ``use.defaults.from: target`` (MM2's default) only settings
set on the source topic itself, with ``source`` also the values the source topic inherits from its
brokers' defaults, so the target matches the source even where the clusters' defaults differ.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

TOPIC_LEVEL_SOURCES = ("DYNAMIC_TOPIC_CONFIG",)
BROKER_DEFAULT_SOURCES = (
    "DYNAMIC_BROKER_CONFIG",
    "DYNAMIC_DEFAULT_BROKER_CONFIG",
    "STATIC_BROKER_CONFIG",
    "DEFAULT_CONFIG",
)


@dataclass(frozen=True)
class ConfigValue:
    name: str
    value: str | None
    source: str  # ConfigSource name, e.g. DYNAMIC_TOPIC_CONFIG
    read_only: bool = False
    sensitive: bool = False


def configs_to_copy(
    entries: Iterable[ConfigValue], exclude: tuple[str, ...], use_defaults_from: str = "target"
) -> dict[str, str]:
    excluded = re.compile("|".join(f"(?:{p})" for p in exclude)) if exclude else None
    wanted_sources = TOPIC_LEVEL_SOURCES + (BROKER_DEFAULT_SOURCES if use_defaults_from == "source" else ())
    copied = {}
    for entry in entries:
        if entry.read_only or entry.sensitive or entry.value is None or entry.source not in wanted_sources:
            continue
        if excluded is not None and excluded.fullmatch(entry.name):
            continue
        copied[entry.name] = entry.value
    return copied
