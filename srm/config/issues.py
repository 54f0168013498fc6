"""Turning validation failures into ConfigIssues that name file, line and key path."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from srm.config.yamlsource import KeyPath, YamlDocument
from srm.errors import ConfigIssue


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def unknown_key(
    doc: YamlDocument, path: KeyPath, choices: Sequence[str], what: str, flow: str | None = None
) -> ConfigIssue:
    key = str(path[-1])
    issue = doc.issue(path, f"unknown {what} {key!r}{did_you_mean(key, choices)}")
    issue.flow = flow
    return issue


def validation_issues(
    doc: YamlDocument,
    base: KeyPath,
    exc: ValidationError,
    choices: Sequence[str],
    flow: str | None = None,
) -> list[ConfigIssue]:
    """One issue per pydantic error; unknown keys get a did-you-mean from ``choices``."""
    issues = []
    for error in exc.errors(include_url=False):
        path: KeyPath = (*base, *(p for p in error["loc"] if isinstance(p, str | int)))
        if error["type"] == "extra_forbidden":
            issues.append(unknown_key(doc, path, choices, "option", flow))
            continue
        issue = doc.issue(path, _message(error))
        issue.flow = flow
        issues.append(issue)
    return issues


def _message(error: ErrorDetails) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "missing":
        return "required key is missing"
    value = error.get("input")
    # Inputs are shown for plain option values only; client blocks may hold secrets.
    if error["type"] != "value_error" and isinstance(value, str | int | float | bool) and not _maybe_secret(error):
        return f"{message} (got {value!r})"
    return message


def _maybe_secret(error: ErrorDetails) -> bool:
    loc = error.get("loc")
    return isinstance(loc, tuple) and any(p in ("client", "producer", "consumer", "admin") for p in loc)
