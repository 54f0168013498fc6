"""Secured local clusters of the test session (tests/conftest.py ``secured`` and ``mtls``), and flows on them.

``secured`` is a pair, ``west`` and ``east``: two SASL_SSL/SCRAM-SHA-512 brokers with a
``StandardAuthorizer``, each with its own throw-away CA. ``mtls`` is one broker that wants a client
certificate its CA signed. The Spark workers cannot see the brokers' folders: CAs, certificates and
keys travel as PEM text (``ssl.*.pem``), never as paths.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import SecretStr

from srm.config import load_config
from srm.config.model import Cluster
from srm.devenv.local import LocalClusters
from srm.devenv.local_security import BrokerSecurity
from tests.replication import SINGLE_BROKER, Env

SIDES = ("west", "east")
MAINTENANCE = ("validate_internal_topics", "ensure_remote_topics", "sync_topic_configs", "sync_topic_acls")


@dataclass(frozen=True)
class SecuredCluster:
    """One running secured broker: where it answers, its client settings (the client user's), its files."""

    alias: str
    bootstrap: str
    client: dict[str, str]
    security: BrokerSecurity
    logs: Path = field(repr=False)

    def admin(self) -> Cluster:
        """The broker's own super user (admin for SCRAM, the broker's certificate for mTLS)."""
        settings: dict[str, Any] = self.security.admin_settings()
        for key in ("sasl.password", "ssl.keystore.password"):
            if key in settings:
                settings[key] = SecretStr(settings[key])
        return Cluster(alias=f"{self.alias}-admin", bootstrap_servers=self.bootstrap, client=settings)


@contextmanager
def local_brokers(base: Path, clusters: dict[str, dict[str, Any]]) -> Iterator[dict[str, SecuredCluster]]:
    """Start ``clusters`` (config entries, ``local:`` marked) with the code of ``make kafka-up``; stop them after."""
    path = base / "srm.yaml"
    path.write_text(yaml.safe_dump({"clusters": clusters, "flows": []}))
    config = load_config(path)
    running = LocalClusters(config.local_clusters(), base)
    try:
        running.up()
        yield {
            m.alias: SecuredCluster(m.alias, m.bootstrap, as_pem(clusters[m.alias]["client"]), m.security, m.logs)
            for m in running.members
            if m.security is not None
        }
    finally:
        running.down()


def as_pem(client: dict[str, str]) -> dict[str, str]:
    """``client`` with every ``ssl.*.location`` file inlined as ``ssl.*.pem`` text."""
    settings = dict(client)
    for key in [k for k in settings if k.startswith("ssl.") and k.endswith(".location")]:
        settings[key.replace(".location", ".pem")] = Path(settings.pop(key)).read_text()
    return settings


def secured_env(
    pair: dict[str, SecuredCluster], tmp: Path, flow: dict[str, object], login: dict[str, str] | None = None
) -> Env:
    """A flow ``west`` -> ``east`` over the secured pair under aliases only this test uses; ``login``
    replaces the client user's settings on both sides (another user, the same password)."""
    token = uuid.uuid4().hex[:6]
    names = {side: f"s{side[0]}{token}" for side in SIDES}
    data = {
        "defaults": SINGLE_BROKER,
        "clusters": {
            names[side]: {"bootstrap.servers": pair[side].bootstrap, "client": {**pair[side].client, **(login or {})}}
            for side in SIDES
        },
        "flows": [{"source": names["west"], "target": names["east"], **flow}],
        "storage": {"warehouse": str(tmp / "warehouse"), "plan_logs": str(tmp / "plan-logs")},
    }
    path = tmp / "srm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return Env(path, load_config(path), tmp, names)


def maintain(env: Env) -> None:
    """Every step of the maintenance DAG for the env's flow, in order, in this process."""
    from srm.airflow import callables

    flow = env.flow()
    for step in MAINTENANCE:
        getattr(callables, step)(str(env.path), flow.source, flow.target)
