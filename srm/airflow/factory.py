"""Every DAG of every enabled flow, built from the configuration: what ``dags/srm_flows.py`` calls.

A flow that is broken in the YAML is logged with its name and file and left out, so it does not
hide the others (``strict=True``, used by tests and ``srm-control validate``, makes it an error).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from srm.airflow.checkpoints_dag import checkpoints_dag
from srm.airflow.failover_dag import failover_dag
from srm.airflow.heartbeats_dag import heartbeats_dag
from srm.airflow.maintenance_dag import maintenance_dag
from srm.airflow.replicate_dag import replicate_dag
from srm.config import load_config
from srm.config.model import Flow

log = logging.getLogger(__name__)
BUILDERS = (replicate_dag, checkpoints_dag, maintenance_dag, heartbeats_dag)


def builders(flow: Flow) -> list[Callable[[Flow, str], Any]]:
    """The DAG builders of ``flow``: no checkpoints DAG when ``emit.checkpoints.enabled`` is false."""
    return [b for b in BUILDERS if b is not checkpoints_dag or flow.settings.emit_checkpoints_enabled]


def build_dags(config_file: str | Path | None = None, *, strict: bool = False) -> dict[str, Any]:
    """dag_id -> DAG for every enabled flow, plus ``srm.failover``."""
    config = load_config(config_file, strict=strict)
    path = str(Path(config.file).resolve())
    dags: dict[str, Any] = {}
    for flow in config.enabled_flows():
        for build in builders(flow):
            dag = build(flow, path)
            dags[dag.dag_id] = dag
    failover = failover_dag(config, path)
    dags[failover.dag_id] = failover
    return dags
