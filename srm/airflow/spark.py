"""The SparkSubmitOperator of a flow's Spark job.

It uses the flow's Airflow Spark connection (``spark.connection_id``, default ``spark_default``:
host ``local[*, 4]`` for the local setup; a standalone/YARN/Kubernetes master in production) and
this interpreter's pyspark, with no Kafka jars (the copy runs in Python workers with librdkafka).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from srm.config.model import Flow
from srm.errors import FlowTakenOverError, SrmError
from srm.spark.session import check_master, is_local, job_conf
from srm.spark.submit import driver_java_options, job_script, submit_environment

# what submit_environment sets
SUBMIT_VARIABLES = ("SPARK_HOME", "PATH", "PYSPARK_PYTHON", "SPARK_LOCAL_IP", "MALLOC_ARENA_MAX")


class FlowSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of one flow's job on the master of the flow's Spark connection.

    The connection is read when the task runs (never at parse time): a missing connection or an
    unusable master fails the task at once, without retries, naming the connection. Off this
    machine the job ships the project in an archive and the configuration file with ``--files``.
    A run that another run took over fails without retries too.
    """

    def __init__(self, *, source: str, target: str, config_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source, self.target, self.config_file = source, target, config_file

    @property
    def flow_name(self) -> str:
        return f"{self.source}->{self.target}"

    def execute(self, context: Any) -> Any:
        from srm.config import load_config

        master = self.master()
        try:
            config = load_config(self.config_file, strict=True)
            flow = config.flow(self.source, self.target)
            s = flow.settings
            conf = job_conf(master, s.spark_pyspark_python, config.flow_clusters(flow), s.tasks_max)
            self.conf = {**conf, **(self.conf or {}), "spark.driver.extraJavaOptions": self.driver_java_options()}
        except SrmError as exc:
            raise AirflowFailException(f"flow {self.flow_name}: {exc}") from None
        environment = submit_environment(master)
        self.env_vars = {k: environment[k] for k in SUBMIT_VARIABLES if k in environment} | (self.env_vars or {})
        if not is_local(master):
            self.files = self.config_file
        self.log.info("flow %s: Spark master %s (Airflow connection %r)", self.flow_name, master, self._conn_id)
        try:
            return super().execute(context)
        except AirflowException as exc:
            if f"Error code is: {FlowTakenOverError.EXIT_STATUS}." not in str(exc):
                raise
            raise AirflowFailException(
                f"flow {self.flow_name} was taken over by another run (the job's last lines above say which); "
                "not retried: stop one of the two runs"
            ) from exc

    def driver_java_options(self) -> str:
        """The driver's JVM options for the job as this run submits it (its arguments rendered:
        the mode is a run parameter of the replicate DAGs)."""
        return driver_java_options(Path(self.application).name, [str(a) for a in self.application_args or ()])

    def master(self) -> str:
        """The master the connection names, checked; AirflowFailException if it is missing or unusable."""
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
        from airflow.sdk import BaseHook

        where = f"flow {self.flow_name}: Airflow connection {self._conn_id!r} (spark.connection_id)"
        try:
            BaseHook.get_connection(self._conn_id)
        except Exception as exc:  # AirflowNotFoundException, a secrets backend's own errors
            raise AirflowFailException(f"{where} cannot be read: {exc}") from None
        try:
            master = str(SparkSubmitHook(conn_id=self._conn_id)._connection["master"])
            check_master(master, where)
        except (SrmError, ValueError) as exc:
            raise AirflowFailException(str(exc)) from None
        return master


def spark_job(
    task_id: str, script: str, flow: Flow, config_file: str, args: list[str], *, timeout: timedelta | None
) -> Any:
    return FlowSparkSubmitOperator(
        source=flow.source,
        target=flow.target,
        config_file=config_file,
        task_id=task_id,
        application=str(job_script(script)),
        application_args=["--source", flow.source, "--target", flow.target, "--config", config_file, *args],
        conn_id=flow.settings.spark_connection_id,
        name=f"srm {script.removesuffix('.py')} {flow.name}",
        execution_timeout=timeout,
    )
