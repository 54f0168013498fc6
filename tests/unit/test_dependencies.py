"""Every third-party package the code imports is declared in pyproject.toml, pinned: the product's
(srm, spark, dags, plugins, include) among the dependencies, the tests' and benchmarks' among them or
the dev extra. A package that only arrives through another one's requirements may go with its next
release."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions

import pytest
from packaging.requirements import Requirement

from srm.paths import project_root

ROOT = project_root()
PRODUCT = ("srm", "spark", "dags", "plugins", "include")
DEVELOPMENT = ("tests", "bench")
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(*extras: str) -> list[Requirement]:
    found = [Requirement(r) for r in PROJECT["dependencies"]]
    for extra in extras:
        found += [Requirement(r) for r in PROJECT["optional-dependencies"][extra]]
    return found


def imported(folders: tuple[str, ...]) -> dict[str, set[str]]:
    """Top-level modules imported by the files under ``folders`` (absolute imports), with the files."""
    local = {p.stem for p in ROOT.iterdir() if p.is_dir() or p.suffix == ".py"}
    found: dict[str, set[str]] = {}
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top not in sys.stdlib_module_names and top not in local:
                        found.setdefault(top, set()).add(str(path.relative_to(ROOT)))
    return found


def undeclared(folders: tuple[str, ...], declared: list[Requirement]) -> dict[str, list[str]]:
    names = {canonical(r.name) for r in declared}
    distributions = packages_distributions()
    return {
        module: sorted(files)[:3]
        for module, files in sorted(imported(folders).items())
        if not {canonical(d) for d in distributions.get(module, [module])} & names
    }


def test_every_package_the_product_imports_is_a_dependency() -> None:
    assert undeclared(PRODUCT, requirements()) == {}


def test_every_package_the_tests_and_benchmarks_import_is_declared() -> None:
    assert undeclared(DEVELOPMENT, requirements("dev")) == {}


@pytest.mark.parametrize("extras", [(), ("dev", "deploy")], ids=["dependencies", "extras"])
def test_every_requirement_is_pinned(extras: tuple[str, ...]) -> None:
    loose = [str(r) for r in requirements(*extras) if [s.operator for s in r.specifier] != ["=="]]
    assert loose == []


def test_the_check_finds_an_undeclared_import() -> None:
    """Without its requirement, a package the product imports is named with the files importing it."""
    without = [r for r in requirements() if canonical(r.name) != "tenacity"]
    assert "srm/kafka/retry.py" in undeclared(PRODUCT, without)["tenacity"]
