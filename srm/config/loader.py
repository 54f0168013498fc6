"""Read the YAML file into the frozen :class:`SrmConfig`, listing every problem with file, line and key.

Top level::

    defaults:  {<settings>}                      # every flow
    clusters:
      <alias>: {bootstrap.servers | connection_id, client, producer, consumer, admin,
                local, source_defaults: {<settings>}, target_defaults: {<settings>}}
    flows:
      - {source: <alias>, target: <alias>, <settings>}
    storage:   {warehouse, plan_logs}
    monitoring: {prometheus.token.file,          # the bearer token Prometheus scrapes /srm/metrics with
                 refresh.seconds}                # how often the monitoring service looks (default 10)

``<settings>`` are the options of :class:`FlowSettings` under MM2's names.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from srm.config.clusters import ClusterSpec, check_alias, client_problems, to_cluster
from srm.config.flows import FlowBuilder
from srm.config.issues import unknown_key, validation_issues
from srm.config.loops import loop_issues
from srm.config.model import Cluster, Monitoring, SrmConfig, Storage
from srm.config.settings import PartialSettings, option_names
from srm.config.yamlsource import YamlDocument, read_yaml
from srm.errors import ConfigError, ConfigIssue, InvariantError
from srm.paths import checkout, local_dir


class StorageSpec(BaseModel):
    """``storage:`` as written."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    warehouse: str | None = Field(None, min_length=1)
    """Where the Delta tables of metrics and sync history live: a path or a URI (default: `.local/warehouse`
    of the checkout)."""
    plan_logs: str | None = Field(None, min_length=1)
    """Where the replicate jobs keep their plan logs (the batches and leases planned, which keep the
    warehouse's appends idempotent across restarts): a path or a URI (default: `.local/plan-logs` of the
    checkout)."""


class MonitoringSpec(BaseModel):
    """``monitoring:`` as written."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, use_attribute_docstrings=True)
    prometheus_token_file: str | None = Field(None, alias="prometheus.token.file", min_length=1)
    """A file holding the bearer token Prometheus scrapes `/srm/metrics` with; unset: the endpoint is off."""
    refresh_seconds: float = Field(10.0, alias="refresh.seconds", ge=1, le=300)
    """How often the monitoring service probes the clusters and observes the flows."""


log = logging.getLogger(__name__)

TOP_LEVEL_KEYS = ("defaults", "clusters", "flows", "storage", "monitoring")
CLUSTER_KEYS = tuple(f.alias or n for n, f in ClusterSpec.model_fields.items())
CONFIG_ENV = "SRM_CONFIG"


def default_config_path() -> Path:
    """``$SRM_CONFIG``, else ``conf/srm.yaml`` of the checkout this package runs from, else (an
    installed wheel) ``conf/srm.yaml`` of the working folder."""
    if os.environ.get(CONFIG_ENV):
        return Path(os.environ[CONFIG_ENV])
    root = checkout()
    return (root if root is not None else Path.cwd()) / "conf" / "srm.yaml"


def load_config(path: str | Path | None = None, *, strict: bool = True) -> SrmConfig:
    """Parse the configuration once.

    Strict (CLI, tests): any problem raises ConfigError listing all of them. Lenient (DAG
    generation): a broken flow is logged with its name and file and left out, so it does not hide
    the others; problems that concern the whole file still raise.
    """
    config, issues = load_config_with_issues(path, check_clients=strict)
    if not issues:
        if config is None:
            raise InvariantError(f"load_config({path}): no configuration and no problem reported")
        return config
    fatal = strict or config is None or any(issue.flow is None for issue in issues)
    if fatal:
        raise ConfigError(issues)
    if config is None:
        raise InvariantError(f"load_config({path}): no configuration and no problem reported")
    for issue in issues:
        log.error("flow %s left out: %s", issue.flow, issue)
    return config


def load_config_with_issues(
    path: str | Path | None = None, *, check_clients: bool = True
) -> tuple[SrmConfig | None, list[ConfigIssue]]:
    """The config without its broken flows, and every issue found (empty when all is well).

    ``check_clients`` asks librdkafka about every client setting (in-process, no network);
    DAG parsing skips it to stay light.
    """
    file = Path(path) if path else default_config_path()
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        return None, [ConfigIssue(str(file), None, "", f"cannot read configuration file: {exc.strerror}")]
    return parse_config(text, str(file), check_clients=check_clients)


def parse_config(text: str, file: str, *, check_clients: bool = True) -> tuple[SrmConfig | None, list[ConfigIssue]]:
    doc = read_yaml(text, file)
    if doc.issues and doc.data is None:
        return None, doc.issues
    return _Builder(doc, check_clients).build()


class _Builder:
    def __init__(self, doc: YamlDocument, check_clients: bool) -> None:
        self.doc = doc
        self.check_clients = check_clients
        self.issues: list[ConfigIssue] = list(doc.issues)

    def build(self) -> tuple[SrmConfig | None, list[ConfigIssue]]:
        data = self.doc.data
        if not isinstance(data, dict):
            self.issues.append(self.doc.issue((), "the file must be a mapping with clusters and flows"))
            return None, self.issues
        for key in data:
            if key not in TOP_LEVEL_KEYS:
                self.issues.append(unknown_key(self.doc, (key,), TOP_LEVEL_KEYS, "top-level key"))
        defaults = self._settings(data.get("defaults"), ("defaults",))
        clusters, cluster_defaults = self._clusters(data.get("clusters"))
        # Flows are checked against every alias the file defines, valid or not, so one broken
        # cluster is reported once rather than again by each flow that uses it.
        defined = set(data["clusters"]) if isinstance(data.get("clusters"), dict) else None
        builder = FlowBuilder(self.doc, defaults or {}, cluster_defaults, defined)
        flows = builder.build(data.get("flows"))
        self.issues += builder.issues
        self.issues += loop_issues(self.doc, flows, builder.indexes)
        broken = {issue.flow for issue in self.issues}
        config = SrmConfig(
            file=self.doc.file,
            defaults=defaults or {},
            clusters=tuple(clusters),
            flows=tuple(f for f in flows if f.name not in broken),
            storage=self._storage(data.get("storage")),
            monitoring=self._monitoring(data.get("monitoring")),
        )
        return config, self.issues

    def _monitoring(self, raw: Any) -> Monitoring:
        """A relative token file is relative to the configuration file's folder."""
        if raw is None:
            return Monitoring()
        try:
            spec = MonitoringSpec.model_validate(raw)
        except ValidationError as exc:
            names = [f.alias or n for n, f in MonitoringSpec.model_fields.items()]
            self.issues += validation_issues(self.doc, ("monitoring",), exc, names)
            return Monitoring()
        token = spec.prometheus_token_file
        if token is not None and not Path(token).is_absolute():
            token = str(Path(self.doc.file).resolve().parent / token)
        return Monitoring(prometheus_token_file=token, refresh_seconds=spec.refresh_seconds)

    def _storage(self, raw: Any) -> Storage:
        """Relative paths are relative to the configuration file's folder; URIs are kept."""
        defaults = {"warehouse": str(local_dir() / "warehouse"), "plan_logs": str(local_dir() / "plan-logs")}
        if raw is None:
            return Storage(**defaults)
        try:
            spec = StorageSpec.model_validate(raw)
        except ValidationError as exc:
            self.issues += validation_issues(self.doc, ("storage",), exc, list(StorageSpec.model_fields))
            return Storage(**defaults)
        base = Path(self.doc.file).resolve().parent
        resolved = {
            key: value if "://" in value or Path(value).is_absolute() else str(base / value)
            for key, value in spec.model_dump(exclude_none=True).items()
        }
        return Storage(**{**defaults, **resolved})

    def _settings(self, raw: Any, path: tuple[str, ...]) -> dict[str, Any] | None:
        if raw is None:
            return None
        try:
            return PartialSettings.model_validate(raw).written()
        except ValidationError as exc:
            self.issues += validation_issues(self.doc, path, exc, option_names())
            return None

    def _clusters(self, raw: Any) -> tuple[list[Cluster], dict[tuple[str, str], dict[str, Any]]]:
        clusters: list[Cluster] = []
        defaults: dict[tuple[str, str], dict[str, Any]] = {}
        if not isinstance(raw, dict) or not raw:
            self.issues.append(self.doc.issue(("clusters",), "clusters must map each alias to its settings"))
            return clusters, defaults
        for alias, body in raw.items():
            path = ("clusters", alias)
            spec = self._cluster_spec(alias, body)
            if spec is None:
                continue
            for level in ("source_defaults", "target_defaults"):
                level_settings = getattr(spec, level)
                if level_settings is not None:
                    defaults[(alias, level)] = level_settings.written()
            clusters.append(to_cluster(alias, spec, self.doc.line(path)))
        return clusters, defaults

    def _cluster_spec(self, alias: str, body: Any) -> ClusterSpec | None:
        path = ("clusters", alias)
        problem = check_alias(alias)
        if problem:
            self.issues.append(self.doc.issue(path, problem))
        if not isinstance(body, dict):
            self.issues.append(self.doc.issue(path, "a cluster must be a mapping (bootstrap.servers: host:port)"))
            return None
        try:
            spec = ClusterSpec.model_validate(body)
        except ValidationError as exc:
            self.issues += validation_issues(self.doc, path, exc, CLUSTER_KEYS + tuple(option_names()))
            return None
        for sub, message in client_problems(spec, self.check_clients):
            self.issues.append(self.doc.issue((*path, *sub), message))
        return None if problem else spec
