"""The SparkSubmitOperator of a flow's Spark job.

It uses the Airflow Spark connection ``spark_default`` (host ``local[*, 4]`` for the local setup;
a standalone/YARN/Kubernetes master in production) and this interpreter's pyspark: the jobs run in
this project's environment, with no Kafka jars (the copy runs in Python workers with librdkafka).
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from srm.config.model import Flow
from srm.paths import project_root

SPARK_CONN_ID = "spark_default"
# spark/replicate.py's exit status when another run took the flow over: retrying would only take
# it back (the newest run wins), so the task fails at once and says why.
TAKEN_OVER_EXIT = 3


class FlowSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of one flow's job; a run that another run took over fails without retries."""

    def __init__(self, *, flow_name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.flow_name = flow_name

    def execute(self, context: Any) -> Any:
        try:
            return super().execute(context)
        except AirflowException as exc:
            if f"Error code is: {TAKEN_OVER_EXIT}." not in str(exc):
                raise
            raise AirflowFailException(
                f"flow {self.flow_name} was taken over by another run (the job's last lines above say which); "
                "not retried: stop one of the two runs"
            ) from exc


def spark_job(
    task_id: str, script: str, flow: Flow, config_file: str, args: list[str], *, timeout: timedelta | None
) -> Any:
    log4j = project_root() / "conf" / "jvm" / "spark-log4j2.properties"
    return FlowSparkSubmitOperator(
        flow_name=flow.name,
        task_id=task_id,
        application=str(project_root() / "spark" / script),
        application_args=["--source", flow.source, "--target", flow.target, "--config", config_file, *args],
        conn_id=SPARK_CONN_ID,
        name=f"srm {script.removesuffix('.py')} {flow.name}",
        conf={
            "spark.pyspark.python": sys.executable,
            "spark.pyspark.driver.python": sys.executable,
            "spark.ui.showConsoleProgress": "false",
            "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log4j}",
        },
        env_vars={"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"},
        execution_timeout=timeout,
    )
