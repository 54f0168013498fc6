"""``<source>_to_<target>.maintenance``: internal topics, remote topics, configs, ACLs, srm-meta, and
the hourly metrics rollup with the metrics tables' compaction."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from srm.airflow import callables
from srm.airflow.defaults import flow_dag
from srm.config.model import Flow
from srm.maintenance.metrics_rollup import GRACE_MARGIN_S

# The Kafka steps, in order: each needs the one before (a wrong internal topic stops the rest).
STEPS = [
    ("validate_internal_topics", callables.validate_internal_topics),
    ("remote_topics", callables.ensure_remote_topics),
    ("sync_topic_configs", callables.sync_topic_configs),
    ("sync_topic_acls", callables.sync_topic_acls),
    ("srm_meta", callables.write_srm_meta),
]
# Steps beside the Kafka steps rather than after them: a cluster that is down or a wrong remote topic
# holds up none of these. The metrics rollup needs the warehouse only; the history's prune the
# warehouse and both clusters (the source's log-start offsets).
WAREHOUSE_STEPS = [
    ("metrics_rollup", callables.metrics_rollup),
    ("prune_sync_history", callables.prune_sync_history),
]


def maintenance_dag(flow: Flow, config_file: str) -> Any:
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import chain

    s = flow.settings
    doc = f"""
### Maintenance of {flow.name}

Every {s.refresh_topics_interval_seconds} s (`refresh.topics.interval.seconds`):
1. **validate_internal_topics** — every internal topic of the flow exists (created if missing) with the right
   cleanup.policy, partition count and replication factor; a wrong one fails the task and is left unchanged.
2. **remote_topics** — every replicated topic has its remote topic on {flow.target}, with enough partitions.
3. **sync_topic_configs** — remote topic configs follow the source's (`config.properties.exclude` untouched).
4. **sync_topic_acls** — topic ACLs mirrored (never ALLOW WRITE; ALLOW ALL becomes READ).
5. **srm_meta** — `srm-meta.internal` on {flow.target} lists every replicated topic pair.

Beside them, independent of the clusters (it runs when one is down):
- **metrics_rollup** — the flow's metrics rolled up per hour into `replication_metrics_hourly` and
  `checkpoint_metrics_hourly` (every complete hour that ended over
  {s.longest_lease_seconds + GRACE_MARGIN_S} s ago), which the REST API reads for windows with samples of an
  hour or more; then OPTIMIZE and VACUUM (7 days' retention) of the four metrics tables, each at most once an
  hour whichever flow's DAG comes first.
- **prune_sync_history** — the flow's exact sync history keeps what translation can still need: the runs
  above each source partition's log-start offset (so it follows the source's retention and topic deletions),
  rewritten sorted; `srm-offset-syncs.{flow.source}.internal` keeps what is not in the warehouse yet.
"""
    with flow_dag(
        flow,
        "maintenance",
        config_file=config_file,
        schedule=timedelta(seconds=s.refresh_topics_interval_seconds),
        doc=doc,
        dagrun_timeout=timedelta(minutes=30),
    ) as dag:
        kwargs = {"config_file": config_file, "source": flow.source, "target": flow.target}
        tasks = {
            name: PythonOperator(
                task_id=name, python_callable=fn, op_kwargs=kwargs, execution_timeout=timedelta(minutes=10)
            )
            for name, fn in STEPS + WAREHOUSE_STEPS
        }
        chain(*(tasks[name] for name, _ in STEPS))
    return dag
