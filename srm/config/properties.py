"""Java ``.properties`` files as Java reads them (javaproperties), with the line each key came from."""

from __future__ import annotations

import re
from dataclasses import dataclass

import javaproperties

_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class Property:
    key: str
    value: str
    line: int


def parse_properties(text: str) -> list[Property]:
    """Every ``key=value`` / ``key: value`` / ``key value`` in order, with the line it starts on;
    comments, continuations and escapes as Java's ``Properties.load`` reads them. Later keys
    override earlier ones (the caller decides)."""
    props = []
    line = 1
    for element in javaproperties.parse(text):
        if isinstance(element, javaproperties.KeyValue):
            props.append(Property(element.key, element.value, line))
        line += len(_LINE_END.findall(element.source))
    return props


def properties_value(text: str, key: str) -> str | None:
    """The value of ``key`` (its last occurrence, as Java keeps it), None if there is none."""
    return javaproperties.loads(text).get(key)
