"""Flows on the session's SASL_SSL broker (tests/conftest.py ``secured``): two aliases of it, so both
sides log in."""

from __future__ import annotations

import uuid
from pathlib import Path

import yaml

from srm.config import load_config
from tests.replication import SINGLE_BROKER, Env


def secured_env(bootstrap: str, client: dict[str, str], tmp: Path, flow: dict[str, object]) -> Env:
    """``west`` and ``east`` are two aliases of the secured broker, so both sides log in with the password."""
    token = uuid.uuid4().hex[:6]
    names = {"west": f"sw{token}", "east": f"se{token}"}
    data = {
        "defaults": SINGLE_BROKER,
        "clusters": {alias: {"bootstrap.servers": bootstrap, "client": client} for alias in names.values()},
        "flows": [{"source": names["west"], "target": names["east"], **flow}],
        "storage": {"warehouse": str(tmp / "warehouse"), "checkpoints": str(tmp / "checkpoints")},
    }
    path = tmp / "srm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return Env(path, load_config(path), tmp, names)
