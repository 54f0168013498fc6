"""The configuration reference (``docs/reference/configuration.md``), generated from the typed model:
every option, its default, the values it accepts, where its default comes from and what it does.

``python -m srm.config.reference > docs/reference/configuration.md`` writes it;
``tests/unit/test_docs.py`` fails when the file no longer matches the model.
"""

from __future__ import annotations

import sys
import types
import typing
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from srm.config.clusters import ClusterSpec, LocalSpec
from srm.config.loader import MonitoringSpec, StorageSpec
from srm.config.settings import ALWAYS_ON, TIED_INTERVALS, FlowSettings

MM2 = "MirrorMaker 2 (Kafka 4.3.1)"
PROJECT = "this project"
# Options of this project; every other flow setting is MirrorMaker 2's, under its name and default.
OWN = {
    "enabled": "MirrorMaker 2's `A->B.enabled`; a flow listed here is on",
    "mode": PROJECT,
    "schedule": PROJECT,
    "start": PROJECT,
    "exactly_once": PROJECT,
    "on_data_loss": PROJECT,
    "errors.retry.timeout": "Kafka Connect's name; its default there is 0 (no retry), 5 minutes here",
    "transaction.interval.ms": PROJECT,
    "transaction.linger.ms": "this project (Kafka Streams' `commit.interval.ms` is the same trade)",
    "task.lease.seconds": PROJECT,
    "task.lease.idle.seconds": PROJECT,
    "tasks.rebalance.interval.seconds": PROJECT,
    "spark.connection_id": "Airflow's Spark provider (its default connection)",
    "spark.pyspark.python": PROJECT,
    "provenance.headers.enabled": PROJECT,
    "provenance.max.hops": PROJECT,
}


def render() -> str:
    lines = [
        "# Configuration reference",
        "",
        "Generated from the typed model (`python -m srm.config.reference`; `srm/config/settings.py`,",
        "`srm/config/clusters.py`, `srm/config/loader.py`): every option `conf/srm.yaml` accepts. An option",
        "not listed is refused by `srm-control validate`, naming its file, line and the nearest known name.",
        "",
        "## Flow settings",
        "",
        "Written under `defaults:`, a cluster's `source_defaults:` / `target_defaults:`, or a flow; the",
        "levels merge in that order (a flow's own value wins). MirrorMaker 2's options keep its names and",
        "defaults.",
        "",
        *_table(FlowSettings, origin=True),
        "",
        "## Clusters: `clusters.<alias>`",
        "",
        *_table(ClusterSpec),
        "",
        "### `clusters.<alias>.local`",
        "",
        *_table(LocalSpec),
        "",
        "## Storage: `storage`",
        "",
        *_table(StorageSpec),
        "",
        "## Monitoring: `monitoring`",
        "",
        *_table(MonitoringSpec),
    ]
    return "\n".join(lines) + "\n"


def _table(model: type[BaseModel], *, origin: bool = False) -> list[str]:
    extra = ["default from"] if origin else []
    columns = ["option" if origin else "key", "default", "accepts", *extra, "what it does"]
    rows = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for name, field in model.model_fields.items():
        key = field.alias or name
        cells = [f"`{key}`", _default(field), _accepts(field), *([_origin(key)] if origin else []), _what(key, field)]
        rows.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return rows


def _origin(key: str) -> str:
    return OWN.get(key, MM2)


def _what(key: str, field: FieldInfo) -> str:
    text = " ".join((field.description or "").split())
    if key in ALWAYS_ON:
        text = text or ALWAYS_ON[key]
    if key in TIED_INTERVALS and not text:
        leader, why = TIED_INTERVALS[key]
        text = f"must equal `{leader}`: {why}"
    return text


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        return "(empty)"
    value = field.default
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, tuple):
        return ", ".join(f"`{item}`" for item in value) if value else "(empty)"
    return f"`{value}`"


def _accepts(field: FieldInfo) -> str:
    kind = _kind(field.annotation)
    low, high = _bound(field, "ge"), _bound(field, "le")
    if low is not None and high is not None:
        kind += f" {low}-{high}"
    elif low is not None:
        kind += f" ≥ {low}"
    if _bound(field, "min_length") and kind == "string":
        kind = "non-empty string"
    return kind


def _bound(field: FieldInfo, name: str) -> Any:
    """A constraint of the field (pydantic keeps ``ge``, ``le``, ``min_length`` as metadata objects)."""
    return next((getattr(m, name) for m in field.metadata if hasattr(m, name)), None)


def _kind(annotation: Any) -> str:  # noqa: PLR0911 - one branch per kind of annotation
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kind(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        kinds = [_kind(a) for a in typing.get_args(annotation) if a is not type(None)]
        return " or ".join(kinds)
    if origin is Literal:
        return " / ".join(f"`{v}`" for v in typing.get_args(annotation))
    if origin is tuple:
        return "regexes (a list or a comma-separated string)"
    if origin is dict:
        return "mapping"
    if annotation is bool:
        return "`true` / `false`"
    if annotation in (int, float):
        return "number" if annotation is float else "integer"
    if annotation is datetime:
        return "ISO-8601 timestamp"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "mapping (see below)" if annotation is LocalSpec else "flow settings (above)"
    return "string"


if __name__ == "__main__":
    sys.stdout.write(render())
