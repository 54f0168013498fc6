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
    loader.flatten_mapping(node)  # resolves YAML merge keys (<<: *anchor)
    result: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str):
            doc.issues.append(
                ConfigIssue(doc.file, line, format_path(path), f"key {key!r} must be a string (quote it)")
            )
            continue
        if key in result:
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
        doc.lines[(*path, key)] = line
        result[key] = _build(loader, value_node, (*path, key), doc)
    return result
