"""``<source>_to_<target>.replicate``: the flow's Spark replication job."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from srm.airflow.defaults import flow_dag
from srm.airflow.spark import spark_job
from srm.config.dag_ids import dag_id
from srm.config.model import Flow
from srm.spark.submit import REPLICATION_MODES

MODES = list(REPLICATION_MODES)


def replicate_dag(flow: Flow, config_file: str) -> Any:
    from airflow.sdk import Param

    continuous = flow.settings.mode == "continuous"
    doc = f"""
### Replication of {flow.name}

Copies the topics of **{flow.source}** that the flow admits to **{flow.target}**, exactly once
(`exactly_once: {str(flow.settings.exactly_once).lower()}`), with `srm/jobs/replicate.py`.
{
        "Runs continuously (`@continuous`); when the job fails Airflow starts it again with exponential backoff."
        if continuous
        else f"Runs on `{flow.settings.schedule}` in available-now mode: copies what is there, then stops."
    }

Param `mode`: `available-now` makes any run a bounded pass, e.g.
`airflow dags test {dag_id(flow, "replicate")} -c '{{"mode": "available-now"}}'`.
Each micro-batch logs one line: records, MiB, partitions, records/s, latency p99, lag.
"""
    with flow_dag(
        flow,
        "replicate",
        config_file=config_file,
        schedule="@continuous" if continuous else flow.settings.schedule,
        doc=doc,
        dagrun_timeout=None if continuous else timedelta(hours=12),
        retries=5,
        params={
            "mode": Param(
                "continuous" if continuous else "available-now",
                enum=MODES,
                description="continuous runs until stopped; available-now copies what is there and stops",
            )
        },
    ) as dag:
        spark_job(
            "replicate",
            "replicate.py",
            flow,
            config_file,
            ["--mode", "{{ params.mode }}"],
            timeout=None if continuous else timedelta(hours=6),
        )
    return dag
