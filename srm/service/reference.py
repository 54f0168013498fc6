"""The REST reference (``docs/reference/rest-api.md``), generated from the app's OpenAPI document:
every path under ``/srm`` with its parameters and answers.

``python -m srm.service.reference > docs/reference/rest-api.md`` writes it; ``tests/unit/test_docs.py``
fails when the file no longer matches the app.
"""

from __future__ import annotations

import sys
from typing import Any

PREFIX = "/srm"  # where the Airflow plugin mounts the app


def render(document: dict[str, Any]) -> str:
    info = document["info"]
    lines = [
        "# REST API reference",
        "",
        f"{info['title']}, version {info['version']}. Generated from the app's OpenAPI document",
        "(`python -m srm.service.reference`), which the API server also serves at `/srm/openapi.json` and",
        "`/srm/docs` (after a login). " + info.get("description", ""),
    ]
    for path, operations in sorted(document["paths"].items()):
        for method, operation in operations.items():
            lines += ["", f"## `{method.upper()} {PREFIX}{path}`", "", operation.get("summary", "")]
            if operation.get("description"):
                lines += ["", " ".join(operation["description"].split())]
            parameters = operation.get("parameters", [])
            if parameters:
                lines += [
                    "",
                    "| parameter | in | required | type | default | what it is |",
                    "|---|---|---|---|---|---|",
                ]
                lines += [_parameter(p) for p in parameters]
            answers = ", ".join(
                f"{code} {r.get('description', '')}" for code, r in operation.get("responses", {}).items()
            )
            lines += ["", f"Answers: {answers}."]
    return "\n".join(lines) + "\n"


def _parameter(parameter: dict[str, Any]) -> str:
    schema = parameter.get("schema", {})
    default = schema.get("default")
    cells = [
        f"`{parameter['name']}`",
        parameter["in"],
        "yes" if parameter.get("required") else "no",
        _type(schema),
        "" if default is None else f"`{str(default).lower() if isinstance(default, bool) else default}`",
        " ".join(parameter.get("description", "").split()),
    ]
    return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"


def _type(schema: dict[str, Any]) -> str:
    if "anyOf" in schema:
        return " or ".join(_type(s) for s in schema["anyOf"] if s.get("type") != "null")
    if "enum" in schema:
        return " / ".join(f"`{v}`" for v in schema["enum"])
    kind = str(schema.get("type", "any"))
    if "minimum" in schema:
        kind += f" ≥ {schema['minimum']}"
    return kind


def app_document() -> dict[str, Any]:
    """The OpenAPI document of the app (no request is served, no cluster reached)."""
    from srm.paths import project_root
    from srm.service.app import create_app

    app = create_app(
        project_root() / "conf" / "srm.yaml", user=lambda: None, groups_reader=lambda: None, flow_access=lambda *_: True
    )
    return dict(app.openapi())


if __name__ == "__main__":
    sys.stdout.write(render(app_document()))
