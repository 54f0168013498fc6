"""A one-screen summary of a configuration (``srm-control validate``), with no secret in it."""

from __future__ import annotations

import textwrap
from typing import Any

from srm.config.model import Cluster, Flow, SrmConfig
from srm.config.settings import FlowSettings

DEFAULTS = FlowSettings()
# Settings shown for every flow; others are listed only where they differ from MM2's default.
HEADLINE = ("mode", "schedule", "exactly_once", "on_data_loss", "start")


def summary_lines(config: SrmConfig) -> list[str]:
    lines = [
        f"{config.file}: {len(config.clusters)} clusters, {len(config.flows)} flows "
        f"({len(config.enabled_flows())} enabled)",
        "",
        "clusters:",
    ]
    lines += [f"  {_cluster_line(c)}" for c in config.clusters]
    lines += ["", "flows:"]
    for flow in config.flows:
        lines += _flow_lines(flow)
    return lines


def _cluster_line(cluster: Cluster) -> str:
    extras = []
    if cluster.local:
        extras.append(f"local broker, controller port {cluster.local.controller_port}")
    protocol = cluster.client.get("security.protocol")
    if protocol:
        extras.append(f"security.protocol={protocol}")
    secrets = sorted(
        k
        for block in (cluster.client, cluster.producer, cluster.consumer, cluster.admin)
        for k, v in block.items()
        if not isinstance(v, str)
    )
    if secrets:
        extras.append("secrets: " + ", ".join(f"{k}=**********" for k in secrets))
    suffix = f"  ({'; '.join(extras)})" if extras else ""
    return f"{cluster.alias:<12} {cluster.describe()}{suffix}"


def _flow_lines(flow: Flow) -> list[str]:
    s = flow.settings
    state = "enabled" if s.enabled else "DISABLED"
    sample = flow.policy.format_remote_topic(flow.source, "<topic>")
    head = f"  {flow.name:<24} {state:<8} policy={s.replication_policy_class} ({sample})"
    lines = [
        head,
        f"    topics={_regexes(s.topics)} exclude={_regexes(s.topics_exclude)}",
        f"    groups={_regexes(s.groups)} exclude={_regexes(s.groups_exclude)}",
    ]
    shown = {k: getattr(s, k) for k in HEADLINE if getattr(s, k) is not None}
    changed = _changed(s)
    settings = " ".join(f"{k}={_fmt(v)}" for k, v in {**shown, **changed}.items())
    lines += textwrap.wrap(
        settings,
        width=100,
        initial_indent="    ",
        subsequent_indent="    ",
        break_long_words=False,
        break_on_hyphens=False,
    )
    return lines


def _changed(settings: FlowSettings) -> dict[str, Any]:
    skip = {
        "enabled",
        "topics",
        "topics_exclude",
        "groups",
        "groups_exclude",
        "replication_policy_class",
        *HEADLINE,
    }
    out = {}
    for name, field in FlowSettings.model_fields.items():
        value = getattr(settings, name)
        if name not in skip and value != getattr(DEFAULTS, name):
            out[field.alias or name] = value
    return out


def _regexes(patterns: tuple[str, ...]) -> str:
    return ",".join(patterns) if patterns else '""'


def _fmt(value: Any) -> str:
    if isinstance(value, tuple):
        return _regexes(value)
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def summary_json(config: SrmConfig) -> dict[str, Any]:
    """The configuration as plain data for ``--json``; secrets masked."""
    return {
        "file": config.file,
        "clusters": [
            {
                "alias": c.alias,
                "bootstrap.servers": c.bootstrap_servers,
                "connection_id": c.connection_id,
                "local": c.local.model_dump() if c.local else None,
                **{
                    block: {k: _masked(v) for k, v in getattr(c, block).items()}
                    for block in ("client", "producer", "consumer", "admin")
                },
            }
            for c in config.clusters
        ],
        "flows": [
            {"source": f.source, "target": f.target, **f.settings.model_dump(by_alias=True, mode="json")}
            for f in config.flows
        ],
    }


def _masked(value: object) -> str:
    return value if isinstance(value, str) else "**********"
