"""A flow's failed tasks, recorded where ``srm-control status`` and ``GET /v2/replications`` read them.

Every flow DAG's ``on_failure_callback`` (a task failed with no retry left) appends one row to the
warehouse's ``task_failures`` table: the DAG, task, run and try, the error's first lines and the link
to the task's log. The error text is the exception's message: this project's errors name clusters,
topics and keys, never secret values.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from functools import partial
from typing import Any

from srm.config.model import Flow

log = logging.getLogger(__name__)
ERROR_CHARS = 2000  # the first lines of an error; the task log holds the rest


def failure_callback(config_file: str, flow: Flow) -> Any:
    """The callback for ``flow``'s DAGs (no I/O until a task fails)."""
    return partial(record_failure, config_file, flow.source, flow.target)


def record_failure(config_file: str, source: str, target: str, context: dict[str, Any]) -> None:
    try:
        _record(config_file, source, target, context)
    except Exception:  # a callback must never hide the task's own failure
        log.exception("could not record the failure of flow %s->%s in the warehouse", source, target)


def _record(config_file: str, source: str, target: str, context: dict[str, Any]) -> None:
    from srm.config import load_config
    from srm.storage.warehouse import TASK_FAILURES, Warehouse

    config = load_config(config_file)
    ti = context["ti"]
    error = context.get("exception")
    text = (f"{type(error).__name__}: {error}" if error is not None else "failed")[:ERROR_CHARS]
    row = {
        "flow": f"{source}->{target}",
        "dag_id": ti.dag_id,
        "task_id": ti.task_id,
        "run_id": ti.run_id,
        "try_number": int(ti.try_number or 0),
        "error": text,
        "log_url": str(getattr(ti, "log_url", "") or ""),
        "failed_at": datetime.now(UTC),
    }
    app_id = f"failure:{ti.dag_id}:{ti.task_id}:{ti.run_id}"
    Warehouse(config.storage.warehouse).append(TASK_FAILURES, [row], app_id, row["try_number"])
