"""``srm.failover``: move consumer groups to the other cluster (manual trigger only)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from srm.airflow import callables
from srm.airflow.defaults import START, TAG, default_args
from srm.config.dag_ids import FAILOVER_DAG_ID
from srm.config.model import SrmConfig

DAG_ID = FAILOVER_DAG_ID


def failover_dag(config: SrmConfig, config_file: str) -> Any:
    from airflow.providers.standard.operators.python import PythonOperator
    from airflow.sdk import DAG, Param

    flows = [f.name for f in config.enabled_flows()] or ["none"]
    first = config.enabled_flows()[0] if config.enabled_flows() else None
    doc = """
### Failover of consumer groups

Trigger it with the flow (`source`, `target`) and the `groups` (names, comma separated, or one regex).
`planned` waits until the flow has copied everything of the groups' topics, then translates their
current offsets exactly; `unplanned` uses the checkpoints on the target (works with the source down).
`dry_run` (default **true**) only logs the table; with `dry_run: false` the offsets are written into
target groups that have no member; active groups are refused with the reason.
For failback, trigger it with the reverse flow (the target's groups on remote topics are translated back).
"""
    with DAG(
        DAG_ID,
        schedule=None,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args=default_args(retries=1),
        dagrun_timeout=timedelta(hours=1),
        tags=[TAG, "failover"],
        doc_md=doc,
        params={
            "source": Param(first.source if first else "", type="string", description=f"flows: {', '.join(flows)}"),
            "target": Param(first.target if first else "", type="string"),
            "groups": Param("", type="string", description="group names, comma separated, or one regex"),
            "mode": Param("planned", enum=["planned", "unplanned"]),
            "dry_run": Param(True, type="boolean"),
        },
    ) as dag:
        PythonOperator(
            task_id="failover",
            python_callable=callables.failover,
            op_kwargs={
                "config_file": config_file,
                "source": "{{ params.source }}",
                "target": "{{ params.target }}",
                "groups": "{{ params.groups }}",
                "mode": "{{ params.mode }}",
                "dry_run": "{{ params.dry_run }}",
            },
            execution_timeout=timedelta(minutes=30),
        )
    return dag
