"""``<source>_to_<target>.heartbeats``: emit heartbeats; fail when the flow's replicated ones go stale."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from srm.airflow import callables
from srm.airflow.defaults import flow_dag
from srm.airflow.sensors import ReplicationAliveSensor
from srm.config.model import Flow

EMIT_FOR_S = 55  # one run a minute emits for most of it, one heartbeat per emit.heartbeats.interval.seconds
STALL_AFTER_S = 120  # no replicated heartbeat younger than this: the flow has stalled


def heartbeats_dag(flow: Flow, config_file: str) -> Any:
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import Param

    doc = f"""
### Heartbeats of {flow.name}

**emit** writes `Heartbeat({flow.source}, {flow.target}, now)` to `heartbeats` on {flow.target} every
{flow.settings.emit_heartbeats_interval_seconds} s (and the reverse pair when no flow {flow.target}->{flow.source}
exists), as MirrorMaker 2 does. **replication_alive** is a deferrable sensor: it passes when the newest heartbeat in
`{flow.policy.format_remote_topic(flow.source, "heartbeats")}` on {flow.target} is younger than the threshold and
fails with the heartbeat's age when none is within its timeout: the flow has stalled.
"""
    with flow_dag(
        flow,
        "heartbeats",
        config_file=config_file,
        schedule=timedelta(minutes=1),
        doc=doc,
        dagrun_timeout=timedelta(minutes=10),
        retries=1,
        params={
            "duration_seconds": Param(EMIT_FOR_S, type="integer", minimum=1, description="how long emit runs"),
            "stall_threshold_seconds": Param(
                STALL_AFTER_S,
                type="integer",
                minimum=1,
                description="newest replicated heartbeat older than this: stalled",
            ),
            "wait_seconds": Param(
                STALL_AFTER_S, type="integer", minimum=0, description="how long the sensor waits before failing"
            ),
        },
    ) as dag:
        PythonOperator(
            task_id="emit",
            python_callable=callables.emit_heartbeats,
            op_kwargs={
                "config_file": config_file,
                "source": flow.source,
                "target": flow.target,
                "duration_seconds": "{{ params.duration_seconds }}",
            },
            execution_timeout=timedelta(minutes=5),
        )
        ReplicationAliveSensor(
            task_id="replication_alive",
            config_file=config_file,
            source=flow.source,
            target=flow.target,
            threshold_s="{{ params.stall_threshold_seconds }}",
            wait_s="{{ params.wait_seconds }}",
            retries=0,
        )
    return dag
