"""srm/'s layers and the absence of import cycles (pyproject.toml, [tool.importlinter]): the tree keeps
them, and an import against them, even one inside a function, breaks the contracts make lint checks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from srm.paths import project_root

LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root)}  # ``srm`` is imported from ``root``
    command = [LINT_IMPORTS, "--config", str(root / "pyproject.toml"), "--no-cache"]
    return subprocess.run(command, check=False, cwd=root, env=env, capture_output=True, text=True, timeout=120)


def test_the_package_keeps_its_layers() -> None:
    result = lint_imports(project_root())
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kept, 0 broken" in result.stdout


def copy_with_import(tmp_path: Path, module: str, imported: str) -> Path:
    """The package and its contracts in ``tmp_path``, ``module`` (a path in srm/) importing ``imported``
    inside a function."""
    shutil.copytree(project_root() / "srm", tmp_path / "srm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(project_root() / "pyproject.toml", tmp_path)
    path = tmp_path / "srm" / module
    path.write_text(path.read_text() + f"\n\ndef added_import() -> None:\n    import {imported}\n")
    return tmp_path


def test_an_import_of_an_upper_layer_breaks_the_contract(tmp_path: Path) -> None:
    result = lint_imports(copy_with_import(tmp_path, "kafka/retry.py", "srm.service.app"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "srm.kafka.retry -> srm.service.app" in result.stdout, result.stdout


def test_an_import_cycle_breaks_the_contract(tmp_path: Path) -> None:
    """The writer uses the resend path; the resend path importing the writer back is a cycle."""
    result = lint_imports(copy_with_import(tmp_path, "replication/resend.py", "srm.replication.writer"))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "no import cycle among the modules of any package of srm BROKEN" in result.stdout, result.stdout
    assert "srm's layers: entry points on top, configuration and errors at the bottom KEPT" in result.stdout


def test_modules_stay_small_and_the_package_root_holds_only_the_shared_few() -> None:
    """A module past 400 lines holds more than one concern; the package's root holds only what every
    layer shares (the errors, where files go, tables for people)."""
    package = project_root() / "srm"
    lines = {str(p.relative_to(package)): len(p.read_text().splitlines()) for p in package.rglob("*.py")}
    long = {name: n for name, n in lines.items() if n > 400}
    assert long == {}, long
    root = sorted(p.name for p in package.glob("*.py"))
    assert root == ["__init__.py", "console.py", "errors.py", "paths.py"], root
