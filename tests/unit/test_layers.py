"""srm/'s layers (pyproject.toml, [tool.importlinter]): the tree keeps them, and an import against
them, even one inside a function, breaks the contract that make lint checks."""

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
    assert "1 kept, 0 broken" in result.stdout


def test_an_import_of_an_upper_layer_breaks_the_contract(tmp_path: Path) -> None:
    shutil.copytree(project_root() / "srm", tmp_path / "srm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(project_root() / "pyproject.toml", tmp_path)
    lower = tmp_path / "srm" / "kafka" / "retry.py"
    lower.write_text(lower.read_text() + "\n\ndef reversed_import() -> None:\n    from srm.service import app\n")
    result = lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "srm.kafka.retry -> srm.service.app" in result.stdout, result.stdout


def test_modules_stay_small_and_the_package_root_holds_only_the_shared_few() -> None:
    """A module past 400 lines holds more than one concern; the package's root holds only what every
    layer shares (the errors, where files go, tables for people)."""
    package = project_root() / "srm"
    lines = {str(p.relative_to(package)): len(p.read_text().splitlines()) for p in package.rglob("*.py")}
    long = {name: n for name, n in lines.items() if n > 400}
    assert long == {}, long
    root = sorted(p.name for p in package.glob("*.py"))
    assert root == ["__init__.py", "console.py", "errors.py", "paths.py"], root
