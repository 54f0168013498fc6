"""Where the project keeps what it generates: JVM jars, local cluster data, the warehouse.

From a checkout (the package installed editable) that is the checkout's ``.cache`` and ``.local``;
from an installed wheel, ``$XDG_DATA_HOME/srm`` (``~/.local/share/srm``). ``$SRM_JVM_CACHE`` and
``$SRM_LOCAL_DIR`` override either.
"""

from __future__ import annotations

import os
from pathlib import Path


def project_root() -> Path:
    """The folder holding this package: the checkout when it is installed editable."""
    return Path(__file__).resolve().parents[1]


def checkout() -> Path | None:
    """The checkout this package runs from, None when it was installed from a wheel."""
    root = project_root()
    return root if (root / "pyproject.toml").is_file() and (root / "conf").is_dir() else None


def data_home() -> Path:
    """What the project generates lives here unless overridden: the checkout, else the user's data folder."""
    root = checkout()
    if root is not None:
        return root
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "srm"


def jvm_cache() -> Path:
    """Jars resolved by ``make jars`` (``$SRM_JVM_CACHE`` overrides)."""
    return Path(os.environ.get("SRM_JVM_CACHE") or data_home() / ".cache" / "jvm")


def local_dir() -> Path:
    """Data and logs of local clusters, job archives (``$SRM_LOCAL_DIR`` overrides)."""
    return Path(os.environ.get("SRM_LOCAL_DIR") or data_home() / ".local")
