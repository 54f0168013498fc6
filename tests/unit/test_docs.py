"""The README is short and starts with the two set-up commands; the documentation site builds with
``mkdocs build --strict`` (a broken link or anchor between its pages fails it); every relative link
of the README resolves."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from srm.paths import project_root

ROOT = project_root()
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def test_the_readme_is_short_and_starts_with_make_demo_and_make_test() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 150, f"README.md has {len(lines)} lines: move detail into docs/"
    assert lines[0] == "```" and lines[3] == "```", lines[:4]
    assert [line.split()[:2] for line in lines[1:3]] == [["make", "demo"], ["make", "test"]]


def test_every_relative_link_of_the_readme_resolves() -> None:
    targets = LINK.findall((ROOT / "README.md").read_text())
    local = [t for t in targets if "://" not in t]
    assert local, "the README links the docs"
    assert [t for t in local if not (ROOT / t).exists()] == []


def test_the_documentation_site_builds_strictly(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "runbooks" / "failover" / "index.html").exists()


def test_the_configuration_reference_is_the_models() -> None:
    """docs/reference/configuration.md is what ``python -m srm.config.reference`` renders now, and it
    names every option a flow, a cluster, ``storage`` and ``monitoring`` accept."""
    from srm.config.clusters import ClusterSpec
    from srm.config.reference import render
    from srm.config.settings import option_names

    written = (ROOT / "docs" / "reference" / "configuration.md").read_text()
    assert written == render(), "run: python -m srm.config.reference > docs/reference/configuration.md"
    keys = [*option_names(), *(f.alias or n for n, f in ClusterSpec.model_fields.items())]
    assert [k for k in keys if f"| `{k}` |" not in written] == []


def test_the_rest_reference_is_the_apps_openapi_document() -> None:
    from srm.service.reference import app_document, render

    document = app_document()
    written = (ROOT / "docs" / "reference" / "rest-api.md").read_text()
    assert written == render(document), "run: python -m srm.service.reference > docs/reference/rest-api.md"
    assert [p for p in document["paths"] if f"`GET /srm{p}`" not in written] == []


def test_a_broken_link_fails_the_strict_build(tmp_path: Path) -> None:
    """The check can fail: a page linking a page that does not exist."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text("# Home\n\nSee [the runbook](runbooks/missing.md).\n")
    (tmp_path / "mkdocs.yml").write_text("site_name: t\nstrict: true\n")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(tmp_path / "mkdocs.yml")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode != 0 and "runbooks/missing.md" in done.stdout + done.stderr
