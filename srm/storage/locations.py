"""Storage locations: a local path or a URI (``file://``, ``s3a://``, ``abfss://``, ``hdfs://``).

A URI keeps its scheme and authority when joined (``pathlib`` would turn ``s3a://bucket/wh`` into
``s3a:/bucket/wh``); a local path stays a path. Only local locations are created on this disk:
object stores and HDFS create folders as they write.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit


def is_uri(location: str) -> bool:
    return "://" in location


def join(location: str, *parts: str) -> str:
    """``location`` with ``parts`` appended, one ``/`` between each."""
    if not is_uri(location):
        return str(Path(location).joinpath(*parts))
    return "/".join([location.rstrip("/"), *(p.strip("/") for p in parts)])


def local_path(location: str) -> Path | None:
    """The folder on this machine that ``location`` names (a path or a ``file://`` URI), else None."""
    if not is_uri(location):
        return Path(location)
    parts = urlsplit(location)
    return Path(parts.path) if parts.scheme == "file" and parts.netloc in ("", "localhost") else None


def ensure(location: str) -> None:
    """Create ``location`` if it is on this machine."""
    path = local_path(location)
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
