"""Where the project keeps what it generates: JVM jars, local cluster data, the warehouse."""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The checkout this package runs from (the package is installed editable)."""
    return Path(__file__).resolve().parents[1]


def jvm_cache() -> Path:
    """Jars resolved by ``make jars`` (``$SRM_JVM_CACHE`` overrides)."""
    return Path(os.environ.get("SRM_JVM_CACHE") or project_root() / ".cache" / "jvm")


def local_dir() -> Path:
    """Data and logs of local clusters (``$SRM_LOCAL_DIR`` overrides)."""
    return Path(os.environ.get("SRM_LOCAL_DIR") or project_root() / ".local")
