"""The typed configuration: clusters, flows and their effective settings, frozen once parsed."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from include.policies import ReplicationPolicy, load_policy
from srm.config.settings import FlowSettings
from srm.errors import NotConfiguredError

ClientValue = str | SecretStr


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)


class LocalBroker(_Frozen):
    """A single-node KRaft broker the project runs itself on loopback (dev, tests, demo)."""

    host: str
    port: int
    controller_port: int
    security_protocol: Literal["PLAINTEXT", "SASL_SSL", "SSL"] = "PLAINTEXT"  # see srm/devenv/local_security.py
    server: dict[str, str] = Field(default_factory=dict)  # extra server.properties entries


class Cluster(_Frozen):
    """A Kafka cluster by alias. Client settings use librdkafka names; secrets are SecretStr."""

    alias: str
    bootstrap_servers: str | None = None
    connection_id: str | None = None  # an Airflow connection holding bootstrap servers / settings
    client: dict[str, ClientValue] = Field(default_factory=dict)
    producer: dict[str, ClientValue] = Field(default_factory=dict)
    consumer: dict[str, ClientValue] = Field(default_factory=dict)
    admin: dict[str, ClientValue] = Field(default_factory=dict)
    local: LocalBroker | None = None
    line: int | None = None

    def describe(self) -> str:
        where = self.bootstrap_servers or f"Airflow connection {self.connection_id!r}"
        if self.bootstrap_servers and self.connection_id:
            where += f" (Airflow connection {self.connection_id!r})"
        return where

    def principal(self) -> str:
        """Who the brokers authorize this cluster's clients as, for a message about a missing ACL:
        ``User:<sasl.username>`` for SCRAM and PLAIN, ``User:ANONYMOUS`` without authentication."""
        protocol = str(self.client.get("security.protocol", "PLAINTEXT")).upper()
        mechanism = str(self.client.get("sasl.mechanism", "GSSAPI")).upper()
        user = self.client.get("sasl.username")
        if self.connection_id and "security.protocol" not in self.client:
            return f"the principal of clusters.{self.alias} (Airflow connection {self.connection_id!r})"
        if protocol.startswith("SASL") and (mechanism == "PLAIN" or mechanism.startswith("SCRAM")):
            if isinstance(user, str):
                return f"User:{user} (clusters.{self.alias})"
            return f"the SASL user (sasl.username) of clusters.{self.alias}"
        if protocol.startswith("SASL"):
            return f"the {mechanism} principal of clusters.{self.alias}"
        if protocol == "SSL" and {"ssl.certificate.location", "ssl.certificate.pem"} & set(self.client):
            # Kafka's default principal of a certificate is User:<its whole subject>; brokers' own
            # ssl.principal.mapping.rules may shorten it (to User:<CN>, say).
            subject = self._certificate_subject()
            return f"the principal of the client certificate{f' {subject}' if subject else ''} (clusters.{self.alias})"
        return f"User:ANONYMOUS (clusters.{self.alias}: no authentication)"

    def _certificate_subject(self) -> str | None:
        """The subject (``CN=...``) of the client certificate, if it can be read."""
        from cryptography import x509

        pem, location = self.client.get("ssl.certificate.pem"), self.client.get("ssl.certificate.location")
        try:
            data = str(pem).encode() if isinstance(pem, str) else Path(str(location)).read_bytes()
            return str(x509.load_pem_x509_certificates(data)[0].subject.rfc4514_string())
        except (OSError, ValueError, IndexError):
            return None


class Flow(_Frozen):
    """A replication flow source -> target with its effective settings."""

    source: str
    target: str
    settings: FlowSettings
    line: int | None = None

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    @cached_property
    def policy(self) -> ReplicationPolicy:
        s = self.settings
        return load_policy(
            s.replication_policy_class,
            separator=s.replication_policy_separator,
            internal_topic_separator_enabled=s.replication_policy_internal_topic_separator_enabled,
            source_cluster_alias=self.source,
        )

    @property
    def prefixless(self) -> bool:
        """True when remote topics keep their names (identity-like policies): loops are possible."""
        return self.policy.format_remote_topic(self.source, "orders") == "orders"


class Storage(_Frozen):
    """Where the warehouse tables and the replicate jobs' plan logs live (absolute paths or URIs)."""

    warehouse: str
    plan_logs: str


class Monitoring(_Frozen):
    """The monitoring service's settings: the file holding the bearer token of Prometheus' scrapes
    (None: the scrape endpoint is off)."""

    prometheus_token_file: str | None = None
    refresh_seconds: float = 10.0  # how often the monitor probes the clusters and observes the flows


class SrmConfig(_Frozen):
    """The whole configuration file, parsed once."""

    file: str
    defaults: dict[str, Any] = Field(default_factory=dict)  # global settings as written
    clusters: tuple[Cluster, ...]
    flows: tuple[Flow, ...]
    storage: Storage
    monitoring: Monitoring = Field(default_factory=Monitoring)

    def cluster(self, alias: str) -> Cluster:
        for cluster in self.clusters:
            if cluster.alias == alias:
                return cluster
        known = ", ".join(c.alias for c in self.clusters)
        raise NotConfiguredError(f"unknown cluster alias {alias!r} in {self.file} (known: {known})")

    def flow(self, source: str, target: str) -> Flow:
        for flow in self.flows:
            if (flow.source, flow.target) == (source, target):
                return flow
        known = ", ".join(f.name for f in self.flows) or "none"
        raise NotConfiguredError(f"no flow {source}->{target} in {self.file} (configured: {known})")

    def flow_clusters(self, flow: Flow) -> tuple[Cluster, Cluster]:
        """``flow``'s source and target clusters."""
        return self.cluster(flow.source), self.cluster(flow.target)

    def enabled_flows(self) -> tuple[Flow, ...]:
        return tuple(f for f in self.flows if f.enabled)

    def local_clusters(self) -> tuple[Cluster, ...]:
        return tuple(c for c in self.clusters if c.local is not None)
