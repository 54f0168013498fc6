"""YAML read with positions: every key path maps to its line, so errors can say where.

``yaml.safe_load`` forgets positions and silently keeps the last of two equal keys; this reader
composes the node tree with the safe loader, records the line of every mapping key and sequence
item, and reports duplicate or non-string keys as issues.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from srm.errors import ConfigIssue

KeyPath = tuple[str | int, ...]


def format_path(path: Sequence[str | int]) -> str:
    """``("flows", 0, "topics")`` -> ``flows[0].topics``; dotted option names stay readable."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass
class YamlDocument:
    """A parsed YAML file: plain Python data plus the 1-based line of every key path."""

    file: str
    data: Any
    lines: dict[KeyPath, int] = field(default_factory=dict)
    issues: list[ConfigIssue] = field(default_factory=list)

    def line(self, path: Sequence[str | int]) -> int | None:
        """Line of ``path``, or of its nearest ancestor that has one (for missing keys)."""
        p = tuple(path)
        while p:
            if p in self.lines:
                return self.lines[p]
            p = p[:-1]
        return self.lines.get((), None)

    def issue(self, path: Sequence[str | int], message: str) -> ConfigIssue:
        return ConfigIssue(self.file, self.line(path), format_path(path), message)


def read_yaml(text: str, file: str) -> YamlDocument:
    """Parse ``text``; syntax errors become a single issue with the line YAML reports."""
    doc = YamlDocument(file=file, data=None)
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            doc.lines[()] = node.start_mark.line + 1
            doc.data = _build(loader, node, (), doc)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        doc.issues.append(ConfigIssue(file, line, "", f"invalid YAML: {exc.problem or exc}"))
    except yaml.YAMLError as exc:
        doc.issues.append(ConfigIssue(file, None, "", f"invalid YAML: {exc}"))
    finally:
        loader.dispose()
    return doc


def _build(loader: yaml.SafeLoader, node: yaml.Node, path: KeyPath, doc: YamlDocument) -> Any:
    if isinstance(node, yaml.MappingNode):
        return _build_mapping(loader, node, path, doc)
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            doc.lines[(*path, index)] = item.start_mark.line + 1
            items.append(_build(loader, item, (*path, index), doc))
        return items
    return loader.construct_object(node, deep=True)


def _build_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode, path: KeyPath, doc: YamlDocument) -> Any:
    # YAML merge keys (<<: *anchor, or a list of anchors): PyYAML puts the merged entries first, the
    # mapping's own after them; an own key overrides a merged one, and of two merged maps the first
    # listed wins (PyYAML orders them so that the later entry wins). Only an own key written twice is
    # a duplicate.
    own = {id(key) for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"}
    loader.flatten_mapping(node)
    result: dict[str, Any] = {}
    merged: set[str] = set()  # keys whose value so far came from a merge
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            doc.issues.append(
                ConfigIssue(doc.file, line, format_path(path), f"key {key!r} must be a string (quote it)")
            )
            continue
        if key in result and id(key_node) in own and key not in merged:
            first = doc.lines[(*path, key)]
            doc.issues.append(
                ConfigIssue(
                    doc.file,
                    line,
                    format_path((*path, key)),
                    f"duplicate key (first defined on line {first})",
                )
            )
            continue
        if id(key_node) in own:
            merged.discard(key)
        else:
            merged.add(key)
        doc.lines[(*path, key)] = line
        result[key] = _build(loader, value_node, (*path, key), doc)
    return result
