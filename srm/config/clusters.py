"""A cluster as written in the YAML, checked, and turned into the typed :class:`Cluster`."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, SecretStr, field_validator

from srm.config.librdkafka import setting_problem
from srm.config.model import ClientValue, Cluster, LocalBroker
from srm.config.secrets import check_references, is_secret
from srm.config.settings import PartialSettings

ALIAS = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
Scalar = str | bool | int | float


def _client_value(value: Any) -> Any:
    # librdkafka takes every setting as a string; YAML booleans become "true"/"false".
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if not isinstance(value, str):
        raise ValueError("client settings must be strings, numbers or booleans")
    return value


ClientSettings = dict[str, Annotated[str, BeforeValidator(_client_value)]]


class LocalSpec(BaseModel):
    """``local:`` of a cluster: run it as a local single-node broker (``true`` or these keys)."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    controller_port: int | None = Field(None, alias="controller.port", ge=1, le=65535)
    """The KRaft controller's port (default: the broker's port + 1)."""
    security_protocol: Literal["PLAINTEXT", "SASL_SSL", "SSL"] = Field("PLAINTEXT", alias="security.protocol")
    """The local broker's listener: SASL_SSL and SSL get certificates made here."""
    server: ClientSettings = Field(default_factory=dict)
    """Extra `server.properties` entries of the local broker."""


def _local(value: Any) -> Any:
    if value is True:
        return {}
    if value is False or value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError("local must be true, false or a mapping with controller.port / server")
    return value


class ClusterSpec(BaseModel):
    """The keys a ``clusters.<alias>`` block accepts."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_attribute_docstrings=True)
    bootstrap_servers: str | None = Field(None, alias="bootstrap.servers", min_length=1)
    """`host1:9092,host2:9092`; or an Airflow connection (`connection_id`) supplies it."""
    connection_id: str | None = Field(None, min_length=1)
    """An Airflow connection holding the bootstrap servers and credentials."""
    client: ClientSettings = Field(default_factory=dict)
    """Client settings of every client of this cluster (Kafka's Java names or librdkafka's; secrets as
    `${env:NAME}` or `${file:PATH:KEY}`)."""
    producer: ClientSettings = Field(default_factory=dict)
    """Settings of its producers only."""
    consumer: ClientSettings = Field(default_factory=dict)
    """Settings of its consumers only."""
    admin: ClientSettings = Field(default_factory=dict)
    """Settings of its admin clients only."""
    local: Annotated[LocalSpec | None, BeforeValidator(_local)] = None
    """`true` (or the keys below): `make kafka-up` runs it as a local single-node broker."""
    source_defaults: PartialSettings | None = None
    """Flow settings of the flows reading from this cluster."""
    target_defaults: PartialSettings | None = None
    """Flow settings of the flows writing into this cluster."""

    @field_validator("bootstrap_servers")
    @classmethod
    def _servers(cls, value: str | None) -> str | None:
        if value is None:
            return value
        for server in (s.strip() for s in value.split(",")):
            host, sep, port = server.rpartition(":")
            if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise ValueError(f"{server!r} is not host:port (bootstrap.servers is 'host1:9092,host2:9092')")
        return value.replace(" ", "")


def check_alias(alias: str) -> str | None:
    if not ALIAS.fullmatch(alias):
        return "cluster alias must be letters, digits, '-' or '_' (no dots: they separate remote topic names)"
    return None


def client_problems(spec: ClusterSpec, ask_librdkafka: bool) -> list[tuple[tuple[str, ...], str]]:
    """Problems beyond single-field types: where (key path under the cluster) and what."""
    problems: list[tuple[tuple[str, ...], str]] = []
    if spec.bootstrap_servers is None and spec.connection_id is None:
        problems.append(((), "missing bootstrap servers: set bootstrap.servers or connection_id"))
    for block in ("client", "producer", "consumer", "admin"):
        for key, value in getattr(spec, block).items():
            problem = check_references(value) or (setting_problem(key, value) if ask_librdkafka else None)
            if problem:
                problems.append(((block, key), problem))
    if spec.local is not None:
        problems.extend(_local_problems(spec))
    return problems


def _local_problems(spec: ClusterSpec) -> list[tuple[tuple[str, ...], str]]:
    servers = spec.bootstrap_servers or ""
    host, _, port = servers.rpartition(":")
    if "," in servers or host not in LOOPBACK_HOSTS:
        return [
            (
                ("local",),
                f"a local cluster needs one loopback bootstrap.servers like 127.0.0.1:19092, got {servers!r}",
            )
        ]
    if spec.local and spec.local.controller_port == int(port):
        return [(("local", "controller.port"), f"controller.port {port} is the broker port; pick another")]
    if spec.local and spec.local.security_protocol != "PLAINTEXT":
        return _secured_client_problems(spec.local.security_protocol, spec.client)
    return []


# What the clients of a secured local cluster must say: a SASL_SSL broker offers SCRAM-SHA-512 only,
# and its client user is the one these settings name (srm/devenv/local_security.py creates it); an SSL
# broker wants a certificate its CA signed (make kafka-up writes the one of User:replicator).
SECURED_LOCAL_CLIENT = {
    "SASL_SSL": {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512"},
    "SSL": {"security.protocol": "SSL"},
}
SECURED_LOCAL_LOGIN = {
    "SASL_SSL": {"sasl.username": "(its user)", "sasl.password": "(its user's password)"},
    "SSL": {
        "ssl.certificate.location": "(<local dir>/kafka/<alias>/security/client.pem) or client.ssl.certificate.pem",
        "ssl.key.location": "(<local dir>/kafka/<alias>/security/client.key) or client.ssl.key.pem",
    },
}


def _secured_client_problems(protocol: str, client: dict[str, str]) -> list[tuple[tuple[str, ...], str]]:
    problems: list[tuple[tuple[str, ...], str]] = []
    needs = f"local.security.protocol {protocol} needs"
    for key, wanted in SECURED_LOCAL_CLIENT[protocol].items():
        if client.get(key, "").upper() != wanted:
            problems.append((("client", key), f"{needs} client.{key}: {wanted}"))
    for key, what in SECURED_LOCAL_LOGIN[protocol].items():
        pem = key.replace(".location", ".pem")
        if not client.get(key) and not client.get(pem):
            problems.append((("client", key), f"{needs} client.{key} {what}"))
    if "ssl.ca.location" not in client and "ssl.ca.pem" not in client:
        problems.append(
            (
                ("client", "ssl.ca.location"),
                f"{needs} client.ssl.ca.location (the local CA, "
                "<local dir>/kafka/<alias>/security/ca.pem, written by `make kafka-up`) or client.ssl.ca.pem",
            )
        )
    return problems


def _secure(settings: dict[str, str]) -> dict[str, ClientValue]:
    return {k: SecretStr(v) if is_secret(k, v) else v for k, v in settings.items()}


def to_cluster(alias: str, spec: ClusterSpec, line: int | None) -> Cluster:
    local = None
    if spec.local is not None and spec.bootstrap_servers:
        host, _, port = spec.bootstrap_servers.rpartition(":")
        controller = spec.local.controller_port or int(port) + 1
        local = LocalBroker(
            host=host,
            port=int(port),
            controller_port=controller,
            security_protocol=spec.local.security_protocol,
            server=dict(spec.local.server),
        )
    return Cluster(
        alias=alias,
        bootstrap_servers=spec.bootstrap_servers,
        connection_id=spec.connection_id,
        client=_secure(spec.client),
        producer=_secure(spec.producer),
        consumer=_secure(spec.consumer),
        admin=_secure(spec.admin),
        local=local,
        line=line,
    )
