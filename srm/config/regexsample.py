"""A concrete string that a regex matches, to test topic filters against each other.

Walks the parse tree of Python's own regex parser and picks the simplest choice at each node
(first branch, first character of a class, the fewest repetitions, or one where zero would leave
the whole string empty). Returns None for constructs it does not model (back-references) or when the result
does not actually match: callers treat that as "no sample".
"""

from __future__ import annotations

import re
import re._constants as sre  # type: ignore[import-not-found]
import re._parser as sre_parse  # type: ignore[import-not-found]
from typing import Any

_CATEGORY_SAMPLE = {
    sre.CATEGORY_DIGIT: "0",
    sre.CATEGORY_NOT_DIGIT: "a",
    sre.CATEGORY_WORD: "a",
    sre.CATEGORY_NOT_WORD: "-",
    sre.CATEGORY_SPACE: " ",
    sre.CATEGORY_NOT_SPACE: "a",
}
_NEGATED_SAMPLES = "ax0_-."


class _Unsupported(Exception):
    pass


def sample_match(pattern: str) -> str | None:
    try:
        parsed = sre_parse.parse(pattern)
        text = _sequence(parsed, 0) or _sequence(parsed, 1)  # "inv.*" -> "inv"; ".*" -> "a"
    except (_Unsupported, re.error, RecursionError):
        return None
    return text if re.fullmatch(pattern, text) else None


def _sequence(items: Any, optional: int) -> str:
    return "".join(_node(op, av, optional) for op, av in items)


def _node(op: Any, av: Any, optional: int) -> str:  # noqa: PLR0911 - one branch per regex construct
    if op is sre.LITERAL:
        return chr(av)
    if op is sre.NOT_LITERAL:
        return "a" if av != ord("a") else "b"
    if op is sre.ANY:
        return "a"
    if op is sre.IN:
        return _char_class(av)
    if op in (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT):
        low, high, sub = av
        count = int(low) if low > 0 else min(optional, int(high))
        return _sequence(sub, optional) * count
    if op is sre.SUBPATTERN:
        return _sequence(av[-1], optional)
    if op is sre.ATOMIC_GROUP:
        return _sequence(av, optional)
    if op is sre.BRANCH:
        return _sequence(av[1][0], optional)
    if op in (sre.AT, sre.ASSERT, sre.ASSERT_NOT):
        return ""
    raise _Unsupported(str(op))


def _char_class(items: Any) -> str:
    if items and items[0][0] is sre.NEGATE:
        excluded = re.compile("[" + "".join(_class_source(items[1:])) + "]")
        for ch in _NEGATED_SAMPLES:
            if not excluded.fullmatch(ch):
                return ch
        raise _Unsupported("negated class")
    op, av = items[0]
    if op is sre.LITERAL:
        return chr(av)
    if op is sre.RANGE:
        return chr(av[0])
    if op is sre.CATEGORY:
        return _CATEGORY_SAMPLE.get(av, "a")
    raise _Unsupported(str(op))


def _class_source(items: Any) -> list[str]:
    out = []
    for op, av in items:
        if op is sre.LITERAL:
            out.append(re.escape(chr(av)))
        elif op is sre.RANGE:
            out.append(f"{re.escape(chr(av[0]))}-{re.escape(chr(av[1]))}")
        elif op is sre.CATEGORY:
            out.append({v: k for k, v in _CATEGORY_CODES.items()}.get(av, ""))
    return out


_CATEGORY_CODES = {
    r"\d": sre.CATEGORY_DIGIT,
    r"\D": sre.CATEGORY_NOT_DIGIT,
    r"\w": sre.CATEGORY_WORD,
    r"\W": sre.CATEGORY_NOT_WORD,
    r"\s": sre.CATEGORY_SPACE,
    r"\S": sre.CATEGORY_NOT_SPACE,
}
