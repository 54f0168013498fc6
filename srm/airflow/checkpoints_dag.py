"""``<source>_to_<target>.checkpoints``: a checkpoint pass, then the group offset sync."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from srm.airflow import callables
from srm.airflow.defaults import flow_dag
from srm.airflow.spark import spark_job
from srm.config.model import Flow
from srm.kafka.internal_topics import history_topic_name
from srm.offsets.retention import TOPIC_MARGIN_S


def checkpoints_dag(flow: Flow, config_file: str) -> Any:
    from airflow.providers.standard.operators.python import PythonOperator

    s = flow.settings
    doc = f"""
### Checkpoints of {flow.name}

Every {s.emit_checkpoints_interval_seconds} s (`emit.checkpoints.interval.seconds`): translates the
committed offsets of {flow.source}'s consumer groups exactly and writes them as MM2 checkpoints to
`{flow.policy.checkpoints_topic(flow.source)}` on {flow.target} (and failback checkpoints to
`{flow.policy.checkpoints_topic(flow.target)}` on {flow.source}), with `srm/jobs/checkpoints.py`.
{
        "Then writes the translated offsets into idle target groups (`sync.group.offsets.enabled`)."
        if s.sync_group_offsets_enabled
        else "Group offset sync is off (`sync.group.offsets.enabled: false`)."
    }
Each pass also deletes the records of `{history_topic_name(flow)}` that the warehouse has ingested, that
no copy progress still names and that are over {TOPIC_MARGIN_S / 60:.0f} minutes old.
"""
    with flow_dag(
        flow,
        "checkpoints",
        config_file=config_file,
        schedule=timedelta(seconds=s.emit_checkpoints_interval_seconds),
        doc=doc,
        dagrun_timeout=timedelta(minutes=30),
    ) as dag:
        checkpoints = spark_job(
            "checkpoints", "checkpoints.py", flow, config_file, ["--no-sync"], timeout=timedelta(minutes=20)
        )
        if s.sync_group_offsets_enabled:
            sync = PythonOperator(
                task_id="sync_group_offsets",
                python_callable=callables.sync_group_offsets,
                op_kwargs={"config_file": config_file, "source": flow.source, "target": flow.target},
                execution_timeout=timedelta(minutes=10),
            )
            checkpoints >> sync
    return dag
