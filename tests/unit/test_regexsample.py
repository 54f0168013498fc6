"""Sample strings for regexes, used to find topics that two flows both admit."""

from __future__ import annotations

import re

import pytest

from srm.config.regexsample import sample_match


@pytest.mark.parametrize(
    ("pattern", "sample"),
    [
        (".*", "a"),
        ("orders", "orders"),
        (r"payments\..*", "payments."),
        ("[a-z]+-v[0-9]{2}", "a-v00"),
        ("(foo|bar)baz", "foobaz"),
        (r"[^.]+\.events", "a.events"),
        (r"\d+", "0"),
        ("inv.*", "inv"),
        ("x?", "x"),
    ],
)
def test_sample_matches_pattern(pattern: str, sample: str) -> None:
    assert sample_match(pattern) == sample
    assert re.fullmatch(pattern, sample)


def test_unsupported_constructs_give_no_sample() -> None:
    assert sample_match(r"(a)\1") is None
