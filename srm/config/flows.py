"""Flows as written -> typed :class:`Flow`, with their settings merged across the five levels.

Precedence, lowest first: the built-in (MM2) default, global ``defaults``, the source cluster's
``source_defaults``, the target cluster's ``target_defaults``, the flow itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from include.policies import PolicyLoadError, resolve_policy_class
from srm.config.issues import did_you_mean, validation_issues
from srm.config.model import Flow
from srm.config.settings import FlowSettings, PartialSettings, option_names
from srm.config.yamlsource import KeyPath, YamlDocument
from srm.errors import ConfigIssue

FLOW_KEYS = ("source", "target")


class FlowBuilder:
    def __init__(
        self,
        doc: YamlDocument,
        global_defaults: dict[str, Any],
        cluster_defaults: dict[tuple[str, str], dict[str, Any]],
        aliases: set[str] | None,
    ) -> None:
        self.doc = doc
        self.global_defaults = global_defaults
        self.cluster_defaults = cluster_defaults
        self.aliases = aliases  # None: the clusters block itself is broken, aliases can't be checked
        self.issues: list[ConfigIssue] = []
        self.indexes: dict[str, int] = {}  # flow name -> position in the flows list

    def build(self, raw: Any) -> list[Flow]:
        if raw is None:
            return []
        if not isinstance(raw, list):
            self.issues.append(self.doc.issue(("flows",), "flows must be a list of {source, target, ...}"))
            return []
        flows = []
        for index, item in enumerate(raw):
            flow = self._flow(index, item)
            if flow is not None:
                flows.append(flow)
        return flows

    def _issue(self, path: KeyPath, message: str, flow: str) -> None:
        issue = self.doc.issue(path, message)
        issue.flow = flow
        self.issues.append(issue)

    def _flow(self, index: int, item: Any) -> Flow | None:
        path: KeyPath = ("flows", index)
        if not isinstance(item, dict):
            self._issue(path, "a flow must be a mapping with source and target", f"flows[{index}]")
            return None
        source, target = (self._alias(index, item, key) for key in FLOW_KEYS)
        name = f"{source}->{target}" if source and target else f"flows[{index}]"
        if source and target and not self._unique(index, name, source, target):
            return None
        written = self._written(index, item, name)
        if source is None or target is None or written is None:
            return None
        settings = self._effective(index, source, target, written, name)
        if settings is None:
            return None
        return Flow(source=source, target=target, settings=settings, line=self.doc.line(path))

    def _alias(self, index: int, item: dict[str, Any], key: str) -> str | None:
        path: KeyPath = ("flows", index, key)
        value = item.get(key)
        flow = f"flows[{index}]"
        if value is None:
            self._issue(path, f"required key {key!r} is missing (a cluster alias)", flow)
        elif not isinstance(value, str):
            self._issue(path, f"{key} must be a cluster alias, got {value!r}", flow)
        elif self.aliases is None:
            return None
        elif value not in self.aliases:
            known = ", ".join(sorted(self.aliases)) or "none"
            self._issue(
                path,
                f"unknown cluster alias {value!r} (known: {known}){did_you_mean(value, self.aliases)}",
                flow,
            )
        else:
            return value
        return None

    def _unique(self, index: int, name: str, source: str, target: str) -> bool:
        if source == target:
            self._issue(("flows", index, "target"), f"a flow cannot replicate {source!r} into itself", name)
            return False
        if name in self.indexes:
            first = self.doc.line(("flows", self.indexes[name]))
            self._issue(("flows", index), f"duplicate flow {name} (first defined on line {first})", name)
            return False
        self.indexes[name] = index
        return True

    def _written(self, index: int, item: dict[str, Any], name: str) -> dict[str, Any] | None:
        rest = {k: v for k, v in item.items() if k not in FLOW_KEYS}
        try:
            return PartialSettings.model_validate(rest).written()
        except ValidationError as exc:
            self.issues += validation_issues(self.doc, ("flows", index), exc, [*FLOW_KEYS, *option_names()], name)
            return None

    def _effective(
        self, index: int, source: str, target: str, written: dict[str, Any], name: str
    ) -> FlowSettings | None:
        layers: list[tuple[KeyPath, dict[str, Any]]] = [
            (("defaults",), self.global_defaults),
            (
                ("clusters", source, "source_defaults"),
                self.cluster_defaults.get((source, "source_defaults"), {}),
            ),
            (
                ("clusters", target, "target_defaults"),
                self.cluster_defaults.get((target, "target_defaults"), {}),
            ),
            (("flows", index), written),
        ]
        merged: dict[str, Any] = {}
        origin: dict[str, KeyPath] = {}
        for path, values in layers:
            merged.update(values)
            origin.update({key: (*path, key) for key in values})
        try:
            settings = FlowSettings.model_validate(merged)
        except ValidationError as exc:
            # Only cross-field rules can fail here: every level was valid on its own.
            for error in exc.errors(include_url=False):
                message = str(error["msg"]).removeprefix("Value error, ")
                self._issue(_cross_field_path(error, origin, index), message, name)
            return None
        try:
            resolve_policy_class(settings.replication_policy_class)
        except PolicyLoadError as exc:
            key = "replication.policy.class"
            self._issue(origin.get(key, ("flows", index, key)), str(exc), name)
            return None
        return settings


def _cross_field_path(error: Any, origin: dict[str, KeyPath], index: int) -> KeyPath:
    """Point a cross-field error at the line where its key was written (else at the flow)."""
    cause = (error.get("ctx") or {}).get("error")
    key = getattr(cause, "key", None)
    return origin.get(key, ("flows", index)) if isinstance(key, str) else ("flows", index)
