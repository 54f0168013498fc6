"""What the Python tasks of the generated DAGs run. Each logs, in a few lines, what it did."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any, TypeVar

log = logging.getLogger("srm.airflow")
F = TypeVar("F", bound=Callable[..., Any])

# Retrying cannot fix these: a wrong internal topic, a topic conflict, a broken or missing flow.
PERMANENT = ("ConfigError", "NotConfiguredError", "TopicConflictError", "RecordFormatError")


def task(fn: F) -> F:
    """A task callable whose permanent errors fail the task at once instead of being retried."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        from airflow.sdk.exceptions import AirflowFailException

        from srm import errors

        try:
            return fn(*args, **kwargs)
        except tuple(getattr(errors, name) for name in PERMANENT) as exc:
            log.error("%s", exc)
            raise AirflowFailException(f"{type(exc).__name__}: {exc} (not retried)") from exc

    return run  # type: ignore[return-value]


def _flow(config_file: str, source: str, target: str) -> Any:
    from srm.config import load_config

    config = load_config(config_file, strict=False)
    return config, config.flow(source, target)


def replicated_topics(config: Any, flow: Any) -> dict[str, int]:
    """Source topics the flow replicates now, with their partition counts."""
    from srm.kafka import clients
    from srm.kafka.topics import partition_counts
    from srm.replication.selector import TopicSelector

    selector = TopicSelector(flow)
    counts = partition_counts(clients.admin_client(config.cluster(flow.source)), include_internal=True)
    return {t: n for t, n in sorted(counts.items()) if selector.replicates(t)}


@task
def validate_internal_topics(config_file: str, source: str, target: str) -> list[str]:
    from srm.maintenance.internal import validate_internal_topics as validate

    config, flow = _flow(config_file, source, target)
    lines = validate(config, flow)
    created = sum(1 for line in lines if ": created" in line)
    log.info("internal topics of %s: %d checked, %d created, the others as expected", flow.name, len(lines), created)
    return lines


@task
def ensure_remote_topics(config_file: str, source: str, target: str) -> dict[str, int]:
    from srm.kafka import clients
    from srm.replication.remote_topics import RemoteTopics

    config, flow = _flow(config_file, source, target)
    topics = replicated_topics(config, flow)
    target_cluster = config.cluster(flow.target)
    remote = RemoteTopics(
        flow, target_cluster, clients.admin_client(config.cluster(flow.source)), clients.admin_client(target_cluster)
    )
    remote.ensure(topics)
    log.info("flow %s: %d replicated topic(s) have their remote topic with enough partitions", flow.name, len(topics))
    return topics


@task
def sync_topic_configs(config_file: str, source: str, target: str) -> list[str]:
    from srm.kafka import clients
    from srm.kafka.topics import partition_counts
    from srm.maintenance.config_sync import sync_topic_configs as sync

    config, flow = _flow(config_file, source, target)
    if not flow.settings.sync_topic_configs_enabled:
        log.info("sync.topic.configs.enabled is false for %s: nothing done", flow.name)
        return []
    target_admin = clients.admin_client(config.cluster(flow.target))
    existing = partition_counts(target_admin, include_internal=True)
    remotes = {t: flow.policy.format_remote_topic(flow.source, t) for t in replicated_topics(config, flow)}
    remotes = {t: r for t, r in remotes.items() if r in existing}
    changes = sync(flow, clients.admin_client(config.cluster(flow.source)), target_admin, remotes)
    log.info("topic config sync of %s: %d topic(s) checked, %d change(s)", flow.name, len(remotes), len(changes))
    for change in changes:
        log.info("  %s", change)
    return [str(c) for c in changes]


@task
def sync_topic_acls(config_file: str, source: str, target: str) -> list[str]:
    from srm.kafka import clients
    from srm.maintenance.acl_sync import sync_topic_acls as sync

    config, flow = _flow(config_file, source, target)
    if not flow.settings.sync_topic_acls_enabled:
        log.info("sync.topic.acls.enabled is false for %s: nothing done", flow.name)
        return []
    remotes = {t: flow.policy.format_remote_topic(flow.source, t) for t in replicated_topics(config, flow)}
    created = sync(
        clients.admin_client(config.cluster(flow.source)), clients.admin_client(config.cluster(flow.target)), remotes
    )
    if created is None:
        log.info("ACL sync of %s skipped: %s has no authorizer", flow.name, flow.source)
        return []
    log.info("ACL sync of %s: %d binding(s) created", flow.name, len(created))
    for acl in created:
        log.info("  %s", acl)
    return [str(a) for a in created]


@task
def write_srm_meta(config_file: str, source: str, target: str) -> int:
    from srm.maintenance.meta import write_meta

    config, flow = _flow(config_file, source, target)
    pairs = {t: flow.policy.format_remote_topic(flow.source, t) for t in replicated_topics(config, flow)}
    write_meta(config.cluster(flow.target), flow, pairs)
    log.info("srm-meta.internal on %s: %d topic pair(s) of %s", flow.target, len(pairs), flow.name)
    return len(pairs)


@task
def metrics_rollup(config_file: str, source: str, target: str) -> dict[str, Any]:
    """The flow's hourly metrics rollups, then OPTIMIZE and VACUUM of the metrics tables (each at
    most once an hour, whichever flow's DAG comes first). Only the warehouse: no cluster needed."""
    from srm.maintenance.compaction import maintain
    from srm.maintenance.metrics_rollup import roll_up
    from srm.storage.warehouse import Warehouse

    config, flow = _flow(config_file, source, target)
    warehouse = Warehouse(config.storage.warehouse)
    rolled = roll_up(warehouse, flow)
    upkeep = maintain(warehouse)
    log.info("metrics rollup of %s and upkeep of the metrics tables:", flow.name)
    for line in (*rolled, *upkeep):
        log.info("  %s", line)
    maintained = [u.table for u in upkeep if not u.skipped]
    return {"rolled_hours": {r.table: r.hours for r in rolled}, "maintained": maintained}


@task
def prune_sync_history(config_file: str, source: str, target: str) -> dict[str, Any]:
    """The flow's sync history pruned below the source's log-start offsets (the files that change
    rewritten, the small ones merged), and its topic trimmed to what is not ingested yet (srm.offsets.retention)."""
    from dataclasses import asdict

    from srm.offsets.retention import HistoryPruner

    config, flow = _flow(config_file, source, target)
    return asdict(HistoryPruner(config, flow).prune())


@task
def emit_heartbeats(config_file: str, source: str, target: str, duration_seconds: Any) -> int:
    from srm.maintenance.heartbeats import emit, heartbeat_pairs

    config, flow = _flow(config_file, source, target)
    pairs = heartbeat_pairs(config, flow)
    if not pairs:
        log.info("emit.heartbeats.enabled is false for %s: nothing emitted", flow.name)
        return 0
    sent = emit(config, flow, float(duration_seconds))
    log.info(
        "emitted %d heartbeat(s) for %s over %s s", sent, ", ".join(f"{a}->{b}" for a, b in pairs), duration_seconds
    )
    return sent


@task
def sync_group_offsets(config_file: str, source: str, target: str) -> dict[str, Any]:
    from srm.kafka import clients
    from srm.offsets.checkpoint_store import read_checkpoints
    from srm.offsets.group_sync import sync_group_offsets as sync

    config, flow = _flow(config_file, source, target)
    topic = flow.policy.checkpoints_topic(flow.source)
    checkpoints = list(read_checkpoints(config.cluster(flow.target), topic).values())
    report = sync(clients.admin_client(config.cluster(flow.target)), checkpoints)
    log.info(
        "group offset sync of %s: %d group(s) written, %d already up to date, %d skipped",
        flow.name,
        len(report.synced),
        sum(1 for g, n in report.kept.items() if g not in report.synced and n),
        len(report.skipped),
    )
    for group, offsets in sorted(report.synced.items()):
        log.info("  %s: %s", group, ", ".join(f"{t}[{p}]={o}" for (t, p), o in sorted(offsets.items())))
    for group, reason in sorted(report.skipped.items()):
        log.info("  %s not written: %s", group, reason)
    return {"synced": sorted(report.synced), "skipped": report.skipped}


@task
def failover(config_file: str, source: str, target: str, *, groups: str, mode: str, dry_run: Any) -> list[str]:
    from srm.errors import NotConfiguredError
    from srm.operations.failover import apply, plan, table

    if not groups.strip():
        raise NotConfiguredError("Param groups is empty: give group names (comma separated) or one regex")
    config, flow = _flow(config_file, source, target)
    plans = plan(config, flow, groups, mode)
    dry = str(dry_run).lower() in ("true", "1", "yes")
    if dry:
        for entry in plans:
            entry.outcome = "dry run: not applied"
    else:
        apply(config, plans)
    lines = table(plans)
    log.info("failover of %s (%s%s) for %d group(s):", flow.name, mode, ", dry run" if dry else "", len(plans))
    for line in lines:
        log.info("  %s", line)
    refused = sorted({p.group for p in plans if p.outcome.startswith("refused")})
    if refused:  # stopping the consumers is for a person to do: not retried
        from airflow.sdk.exceptions import AirflowFailException

        raise AirflowFailException(
            f"{len(refused)} group(s) not failed over, see the table above: {', '.join(refused)}"
        )
    return lines
