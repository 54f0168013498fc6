"""What the service asks Airflow (the API server it runs in): whether a user may read a flow, which
DAGs are paused, and who may read consumer-group positions."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from srm.config.dag_ids import FAILOVER_DAG_ID, dag_id
from srm.config.model import Flow


def airflow_flow_access(user: Any, flow: Flow) -> bool:
    """Read access to the flow's replicate DAG, as Airflow's auth manager says."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagDetails

    return bool(
        get_auth_manager().is_authorized_dag(method="GET", details=DagDetails(id=dag_id(flow, "replicate")), user=user)
    )


def airflow_paused(dag_ids: list[str]) -> dict[str, bool]:
    """Which of ``dag_ids`` are paused, from Airflow's database (the API server's own session)."""
    from airflow.models.dag import DagModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(select(DagModel.dag_id, DagModel.is_paused).where(DagModel.dag_id.in_(dag_ids)))
        return {dag_id: bool(is_paused) for dag_id, is_paused in rows}


def failover_dag_reader() -> Callable[..., Any]:
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
    from airflow.api_fastapi.core_api.security import requires_access_dag

    return requires_access_dag("GET", DagAccessEntity.RUN, param_dag_id=FAILOVER_DAG_ID)
