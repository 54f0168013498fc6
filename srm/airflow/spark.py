"""The SparkSubmitOperator of a flow's Spark job.

It uses the flow's Airflow Spark connection (``spark.connection_id``, default ``spark_default``:
host ``local[*, 4]`` for the local setup; a standalone/YARN/Kubernetes master in production) and
this interpreter's pyspark, with no Kafka jars (the copy runs in Python workers with librdkafka).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException, AirflowTaskTerminated

from srm.config.model import Flow
from srm.errors import FlowTakenOverError, SrmError
from srm.spark import driver
from srm.spark.session import check_master, is_local, job_conf
from srm.spark.submit import driver_java_options, job_script, submit_environment

# what submit_environment sets
SUBMIT_VARIABLES = ("SPARK_HOME", "PATH", "PYSPARK_PYTHON", "SPARK_LOCAL_IP", "MALLOC_ARENA_MAX")
# How long a killed task waits for a replication job to stop gracefully (its copiers commit) before
# it kills spark-submit: within the 5 s Airflow's supervisor leaves between its SIGTERM and SIGKILL.
STOP_GRACE_S = 4.0


class FlowSparkSubmitOperator(SparkSubmitOperator):
    """spark-submit of one flow's job on the master of the flow's Spark connection.

    The connection is read when the task runs (never at parse time): a missing connection or an
    unusable master fails the task at once, without retries, naming the connection. Off this
    machine the job ships the project in an archive and the configuration file with ``--files``.
    A run that another run took over fails without retries too.

    A replication job's driver has the stop signals to itself (:mod:`srm.spark.driver`): a killed
    task (marked failed, timed out, its worker stopped) stops it gracefully, its copiers committing,
    and kills it only if it has not ended within STOP_GRACE_S. A task ended by SIGTERM fails without
    a retry, as Airflow fails a terminated task (a job stopped early is not a task done); a timed-out
    one fails with Airflow's timeout error, retried as the task says.
    """

    def __init__(self, *, source: str, target: str, config_file: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.source, self.target, self.config_file = source, target, config_file
        self.killed = False

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
            result = super().execute(context)
        except AirflowException as exc:
            if self.killed:
                raise AirflowTaskTerminated(f"flow {self.flow_name}: the task was killed; its job was killed") from exc
            if f"Error code is: {FlowTakenOverError.EXIT_STATUS}." not in str(exc):
                raise
            raise AirflowFailException(
                f"flow {self.flow_name} was taken over by another run (the job's last lines above say which); "
                "not retried: stop one of the two runs"
            ) from exc
        if self.killed:  # the job ended well because it was asked to: the task did not (failed, not retried)
            raise AirflowTaskTerminated(f"flow {self.flow_name}: the task was killed; its job stopped gracefully")
        return result

    def _get_hook(self) -> SparkSubmitHook:
        hook = super()._get_hook()
        if self.stops_gracefully(hook):
            build = hook._build_spark_submit_command
            hook._build_spark_submit_command = lambda application: driver.ignoring(build(application))  # type: ignore[method-assign]
        return hook

    def stops_gracefully(self, hook: SparkSubmitHook) -> bool:
        """Does the job's Python driver run under this task's spark-submit, and stop gracefully on a signal?"""
        return driver.stops_gracefully(self.application) and hook._connection.get("deploy_mode") != "cluster"

    def on_kill(self) -> None:
        # Called in the task's SIGTERM handler (or after a timeout): nothing is logged before the
        # driver has the signal, so that a handler that lands while the task logs cannot wait on it.
        self.killed = True
        hook = self._hook
        process = getattr(hook, "_submit_sp", None)
        if hook is not None and process is not None and self.stops_gracefully(hook):
            stopped = driver.stop(process, self.application, STOP_GRACE_S)
            if stopped:
                self.log.info("flow %s: the job stopped (exit code %s)", self.flow_name, process.returncode)
                return
            driver.kill(process, self.application)
            self.log.warning("flow %s: the job did not stop within %.0f s; killed", self.flow_name, STOP_GRACE_S)
        super().on_kill()

    def driver_java_options(self) -> str:
        """The driver's JVM options for the job as this run submits it (its arguments rendered:
        the mode is a run parameter of the replicate DAGs)."""
        return driver_java_options(Path(self.application).name, [str(a) for a in self.application_args or ()])

    def master(self) -> str:
        """The master the connection names, checked; AirflowFailException if it is missing or unusable."""
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
