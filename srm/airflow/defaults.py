"""What every generated DAG shares: ids, tags, retries, timeouts, start date."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from srm.config.dag_ids import dag_id
from srm.config.model import Flow

START = datetime(2026, 1, 1)  # no catch-up: runs start from the first schedule after deployment
TAG = "srm"


def tags(flow: Flow, job: str) -> list[str]:
    return [TAG, job, f"flow:{flow.name}"]


def default_args(retries: int = 3) -> dict[str, Any]:
    """Retries with exponential backoff: transient cluster trouble heals, a broken flow stops soon."""
    return {
        "owner": "srm",
        "retries": retries,
        "retry_delay": timedelta(seconds=30),
        "retry_exponential_backoff": 2.0,
        "max_retry_delay": timedelta(minutes=10),
        "execution_timeout": timedelta(hours=1),
    }


def flow_dag(
    flow: Flow,
    job: str,
    *,
    config_file: str,
    schedule: Any,
    doc: str,
    dagrun_timeout: timedelta | None,
    retries: int = 3,
    params: dict[str, Any] | None = None,
) -> Any:
    """The DAG ``<source>_to_<target>.<job>`` with what every flow DAG shares: one run at a time,
    no catch-up, retries with backoff, tags and docs, and a failed task recorded for the flow's status."""
    from airflow.sdk import DAG

    from srm.airflow.failures import failure_callback

    return DAG(
        dag_id(flow, job),
        schedule=schedule,
        start_date=START,
        catchup=False,
        max_active_runs=1,
        default_args={**default_args(retries), "on_failure_callback": failure_callback(config_file, flow)},
        dagrun_timeout=dagrun_timeout,
        tags=tags(flow, job),
        doc_md=doc,
        params=params or {},
    )
