"""``<source>_to_<target>.maintenance``: internal topics, remote topics, configs, ACLs, srm-meta."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from srm.airflow import callables
from srm.airflow.defaults import flow_dag
from srm.config.model import Flow

STEPS = [
    ("validate_internal_topics", callables.validate_internal_topics),
    ("remote_topics", callables.ensure_remote_topics),
    ("sync_topic_configs", callables.sync_topic_configs),
    ("sync_topic_acls", callables.sync_topic_acls),
    ("srm_meta", callables.write_srm_meta),
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
        tasks = [
            PythonOperator(task_id=name, python_callable=fn, op_kwargs=kwargs, execution_timeout=timedelta(minutes=10))
            for name, fn in STEPS
        ]
        chain(*tasks)
    return dag
