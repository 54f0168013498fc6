"""Secrets in client settings: which keys are secret, and ``${env:NAME}`` / ``${file:PATH:KEY}`` references.

A secret is held as ``pydantic.SecretStr`` from the moment the YAML is read, so printing the config,
a summary, a log line or an API response shows ``**********``. References are resolved only when a
client is built, and an unresolvable one names the cluster and key, never a value.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from srm.errors import SrmError

if TYPE_CHECKING:
    from srm.config.model import Cluster

_SECRET_KEY = re.compile(r"password|secret|jaas|token|credential|(^|\.)key\.pem$|(^|\.)ssl\.key$|user\.info")
REFERENCE = re.compile(r"\$\{(?P<provider>[a-z]+):(?P<arg>[^}]*)\}")
_PROVIDERS = ("env", "file")


def is_secret_key(key: str) -> bool:
    """True for client settings whose values must never be shown (passwords, JAAS configs, keys)."""
    return bool(_SECRET_KEY.search(key.lower()))


def clear_secrets(cluster: Cluster) -> list[str]:
    """Secret client settings of ``cluster`` written as values, not only as references
    (``consumer.sasl.password``, ...): whoever builds its clients receives these values."""
    found = []
    for scope in ("client", "producer", "consumer", "admin"):
        for key, value in getattr(cluster, scope).items():
            plain = value.get_secret_value() if isinstance(value, SecretStr) else value
            if is_secret_key(key) and REFERENCE.sub("", plain).strip():
                found.append(key if scope == "client" else f"{scope}.{key}")
    return found


def check_references(value: str) -> str | None:
    """A problem with the ``${...}`` references in ``value``, or None when they are well formed."""
    for match in REFERENCE.finditer(value):
        provider, arg = match["provider"], match["arg"]
        if provider not in _PROVIDERS:
            return f"unknown reference provider {provider!r} in ${{{provider}:...}} (use env or file)"
        if provider == "env" and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", arg):
            return f"${{env:{arg}}} does not name an environment variable"
        if provider == "file" and ":" not in arg:
            return "${file:...} needs a path and a key: ${file:/etc/kafka/secrets.properties:password}"
    return None


def resolve_references(value: str, where: str) -> str:
    """Replace every reference in ``value``; ``where`` (cluster and key) names a failure."""

    def replace(match: re.Match[str]) -> str:
        provider, arg = match["provider"], match["arg"]
        if provider == "env":
            if arg not in os.environ:
                raise SrmError(f"{where}: environment variable {arg} is not set")
            return os.environ[arg]
        path, _, key = arg.rpartition(":")
        return _read_properties_key(Path(path), key, where)

    return REFERENCE.sub(replace, value)


def _read_properties_key(path: Path, key: str, where: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SrmError(f"{where}: cannot read secrets file {path}: {exc.strerror}") from None
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.strip() == key and not line.lstrip().startswith(("#", "!")):
            return value.strip()
    raise SrmError(f"{where}: secrets file {path} has no key {key!r}")
