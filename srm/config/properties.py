"""Java ``.properties`` files as Java reads them, with the line each key came from."""

from __future__ import annotations

from dataclasses import dataclass

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


@dataclass(frozen=True)
class Property:
    key: str
    value: str
    line: int


def parse_properties(text: str) -> list[Property]:
    """Comments (``#``/``!``) on their own line, ``key=value``/``key: value``/``key value``,
    backslash line continuations and escapes; later keys override earlier ones (caller decides)."""
    props = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start = i
        logical = lines[i].lstrip()
        while _continues(logical) and i + 1 < len(lines):
            i += 1
            logical = logical[:-1] + lines[i].lstrip()
        i += 1
        if not logical or logical[0] in "#!":
            continue
        key, value = _split(logical)
        props.append(Property(_unescape(key), _unescape(value), start + 1))
    return props


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split(line: str) -> tuple[str, str]:
    i = 0
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            i += 2
            continue
        if ch in "=: \t\f":
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def _unescape(text: str) -> str:
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and i + 6 <= len(text):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
