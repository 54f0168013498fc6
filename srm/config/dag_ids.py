"""The ids of the Airflow DAGs generated from the configuration, which the REST API, the monitor and
a flow's health name too (without importing Airflow's layer)."""

from __future__ import annotations

from srm.config.model import Flow

FAILOVER_DAG_ID = "srm.failover"  # the one failover DAG, for every flow


def dag_id(flow: Flow, job: str) -> str:
    """The id of ``flow``'s DAG of ``job`` (replicate, checkpoints, maintenance, heartbeats)."""
    return f"{flow.source}_to_{flow.target}.{job}"
