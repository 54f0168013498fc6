"""Parse the DAG folder the way Airflow's DAG processor does and print what it found, as JSON.

``python -m srm.airflow.probe`` in a fresh interpreter, with AIRFLOW_HOME, the DAG folder and
SRM_CONFIG set (``eval "$(python -m srm.devenv.airflow env)"``): every DAG with its schedule, tasks,
retries and Params, the import errors, the parse time, and which heavy client libraries parsing
imported (none may be). The DAG tests and ``bench.dag_parse`` read its output.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

HEAVY = ("confluent_kafka", "pyspark", "deltalake", "pyarrow", "pandas", "py4j")


def seconds(value: Any) -> float | None:
    return None if value is None else value.total_seconds()


def describe(dag: Any) -> dict[str, Any]:
    return {
        "schedule": str(dag.schedule),
        "max_active_runs": dag.max_active_runs,
        "catchup": dag.catchup,
        "tags": sorted(dag.tags),
        "doc_md": dag.doc_md or "",
        "dagrun_timeout_s": seconds(dag.dagrun_timeout),
        "params": {name: dag.params.get_param(name).schema | {"default": dag.params[name]} for name in dag.params},
        "upstream": {t.task_id: sorted(t.upstream_task_ids) for t in dag.tasks},
        "tasks": {
            t.task_id: {
                "type": type(t).__name__,
                "retries": t.retries,
                "retry_delay_s": seconds(t.retry_delay),
                "retry_exponential_backoff": t.retry_exponential_backoff,
                "execution_timeout_s": seconds(t.execution_timeout),
                "conn_id": getattr(t, "_conn_id", None),
                "application": getattr(t, "application", None),
                "application_args": getattr(t, "application_args", None),
                "conf": getattr(t, "conf", None),
            }
            for t in dag.tasks
        },
    }


def main() -> None:
    from airflow.dag_processing.dagbag import DagBag

    before = set(sys.modules)
    start = time.perf_counter()
    bag = DagBag()  # the DAG folder of AIRFLOW__CORE__DAGS_FOLDER
    parse_s = time.perf_counter() - start
    print(
        json.dumps(
            {
                "parse_s": parse_s,
                "import_errors": bag.import_errors,
                "heavy_imports": sorted({m.split(".")[0] for m in set(sys.modules) - before} & set(HEAVY)),
                "dags": {dag_id: describe(dag) for dag_id, dag in bag.dags.items()},
            },
            default=str,
        )
    )


if __name__ == "__main__":
    main()
