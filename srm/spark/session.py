"""The Spark session of a job and the settings it runs with: masters, the job's Spark settings on
this machine or off it (srm.spark.job_archive), and what travels to executors of the clusters' secrets.

Python workers must run the project's interpreter (``spark.pyspark.python``): pyspark otherwise
starts ``python3`` from PATH, which lacks this project's packages. The copy runs in Python
workers with librdkafka, so no Kafka jars are needed on the JVM side.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from srm.config.model import Cluster
from srm.errors import SrmError

log = logging.getLogger("srm.replicate")

DEFAULT_MASTER = "local[*, 4]"  # all cores; a failed task is retried up to 4 times
MALLOC_ARENA_MAX = "2"  # glibc arenas per process of a job (srm.spark.submit.submit_environment)
# The executors of a job off this machine compile with C1 alone (HotSpot's quick compiler). Every
# task they run is a Python copy slot: their JVM only starts tasks and carries results, so C2's
# peak speed buys nothing, while its compiler threads slowed each executor's start (the JVM start to
# its registration with the driver) on busy hosts: docs/benchmarks/lab-notes.md. They follow the
# operator's own options (executor_java_options); a job's own spark.executor.extraJavaOptions replaces both.
EXECUTOR_JVM_OPTIONS = "-XX:TieredStopAtLevel=1"
EXECUTOR_JAVA_OPTIONS_KEY = "spark.executor.extraJavaOptions"
MASTER_FORMS = "local, local[N], local[N, retries], spark://HOST:PORT[,HOST:PORT], yarn, k8s://URL"


def local_master(tasks: int) -> str:
    """A local master with two task threads for each of ``tasks`` slots, all cores at least:
    continuous mode holds one Spark task per slot for a whole lease, and a local application's
    threads are fixed when it starts, so a ``tasks.max`` raised in the YAML while the job runs
    (up to twice the first) takes effect at the next lease instead of ending the job (Spark's
    local threads are not CPU reservations; the copy runs in Python worker processes)."""
    cores = os.cpu_count() or 1
    threads = max(cores, 2 * tasks)
    return DEFAULT_MASTER if threads == cores else f"local[{threads}, 4]"


def is_local(master: str | None) -> bool:
    """Whether the job's executors run on this machine (the default master is local)."""
    return master is None or master == "local" or master.startswith("local[")


def check_master(master: str, where: str) -> None:
    """Refuse a master spark-submit cannot use, before starting it: ``where`` says where it was given."""
    if is_local(master):
        if not re.fullmatch(r"local(\[(\*|\d+)(, *\d+)?\])?", master):
            raise SrmError(f"{where}: Spark master {master!r} is not a valid local master ({MASTER_FORMS})")
        return
    if master.startswith("spark://"):
        for address in master.removeprefix("spark://").split(","):
            host, _, port = address.rpartition(":")
            if not host or not port.isdigit():
                raise SrmError(f"{where}: Spark master {master!r}: {address!r} is not HOST:PORT")
            try:
                socket.create_connection((host, int(port)), timeout=5).close()
            except OSError as exc:
                raise SrmError(f"{where}: Spark master {master!r} does not answer at {address}: {exc}") from None
        return
    if master == "yarn":
        if not (os.environ.get("HADOOP_CONF_DIR") or os.environ.get("YARN_CONF_DIR")):
            raise SrmError(f"{where}: Spark master 'yarn' needs HADOOP_CONF_DIR or YARN_CONF_DIR in the environment")
        return
    if master.startswith("k8s://"):
        return
    raise SrmError(f"{where}: Spark master {master!r} is not one Spark knows ({MASTER_FORMS})")


def job_conf(
    master: str | None,
    executor_python: str | None = None,
    clusters: tuple[Cluster, ...] = (),
    cores: int | None = None,
) -> dict[str, str]:
    """Spark settings of a job on ``master``. On this machine its Python workers run this
    interpreter; elsewhere the executors get the project and its dependencies in an archive
    (:mod:`srm.spark.job_archive`) and run ``executor_python`` (default ``python3.<minor>``), and
    :func:`secrets_conf` guards the client settings of ``clusters`` they receive. On a standalone
    master an application takes every free core unless told otherwise, so a continuous flow would
    hold the whole cluster: ``cores`` (the flow's ``tasks.max``) caps it (``spark.cores.max``)."""
    from srm.spark import job_archive

    conf = {"spark.pyspark.driver.python": sys.executable, "spark.ui.showConsoleProgress": "false"}
    if is_local(master):
        return {**conf, "spark.pyspark.python": sys.executable}
    conf["spark.executorEnv.MALLOC_ARENA_MAX"] = MALLOC_ARENA_MAX  # as submit_environment's, for remote workers
    conf[EXECUTOR_JAVA_OPTIONS_KEY] = executor_java_options()
    if cores is not None and str(master).startswith("spark://"):
        conf["spark.cores.max"] = str(cores)
    return {
        **conf,
        "spark.pyspark.python": executor_python or job_archive.executor_python(),
        **job_archive.spark_conf(job_archive.build()),
        **secrets_conf(str(master), clusters),
    }


def executor_java_options() -> str:
    """The executors' JVM options of a job off this machine: the operator's, from the
    ``spark-defaults.conf`` spark-submit reads (``$SPARK_CONF_DIR``, else the ``conf`` folder of
    pyspark's Spark home), which the job's own ``--conf`` would otherwise replace, then ours."""
    import javaproperties
    import pyspark

    folder = os.environ.get("SPARK_CONF_DIR") or str(Path(pyspark.__file__).parent / "conf")
    defaults = Path(folder) / "spark-defaults.conf"
    theirs = ""
    if defaults.is_file():  # Spark reads it as Java properties
        with defaults.open(encoding="utf-8") as file:
            theirs = javaproperties.load(file).get(EXECUTOR_JAVA_OPTIONS_KEY, "").strip()
    return f"{theirs} {EXECUTOR_JVM_OPTIONS}".strip()


AUTH_SECRET_ENV = "_SPARK_AUTH_SECRET"  # Spark's own: read by the driver when spark.authenticate is on


def secrets_conf(master: str, clusters: tuple[Cluster, ...]) -> dict[str, str]:
    """What the executors of a job off this machine may receive of ``clusters``' settings.

    ``${env:...}``/``${file:...}`` references travel as references and are resolved where the
    client is built. A secret written as a value travels inside the tasks, so Spark's
    authentication and RPC and I/O encryption are switched on for the job (on a standalone master
    with the cluster's shared secret from ``$_SPARK_AUTH_SECRET``; YARN and Kubernetes make one per
    application). Settings kept in an Airflow connection cannot be read by executors: refused.
    """
    from srm.config.secrets import clear_secrets

    clear: list[str] = []
    for cluster in clusters:
        if cluster.connection_id:
            raise SrmError(
                f"cluster {cluster.alias}: its settings are in Airflow connection {cluster.connection_id!r}, which "
                f"executors of master {master!r} cannot read; write bootstrap.servers and the client settings in the "
                "YAML, secrets as ${env:NAME} or ${file:PATH:KEY} references resolved on the executors"
            )
        clear += [f"cluster {cluster.alias}: {key}" for key in clear_secrets(cluster)]
    if not clear:
        return {}
    if master.startswith("spark://") and not os.environ.get(AUTH_SECRET_ENV):
        raise SrmError(
            f"{'; '.join(clear)} hold secret values that the executors of {master} would receive: set the "
            f"standalone cluster's spark.authenticate.secret in {AUTH_SECRET_ENV} (the job then authenticates and "
            "encrypts its traffic), or write them as ${env:NAME} / ${file:PATH:KEY} references"
        )
    log.info("%s: secret values travel to the executors; Spark authentication and encryption are on", "; ".join(clear))
    return {
        "spark.authenticate": "true",
        "spark.network.crypto.enabled": "true",
        "spark.io.encryption.enabled": "true",
    }


SESSION_CONF = {
    "spark.python.worker.reuse": "true",
    "spark.sql.shuffle.partitions": "4",
    # A continuous replication job runs a Spark job per lease, for as long as it runs. Spark's status
    # store keeps 1,000 jobs and stages and 100,000 tasks by default, in the driver's heap: hours of
    # growth (bench.soak) before the first is dropped. A few of each are enough to look at.
    "spark.ui.retainedJobs": "50",
    "spark.ui.retainedStages": "50",
    "spark.ui.retainedTasks": "1000",
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.retainedDeadExecutors": "10",
}


def build_session(
    app_name: str,
    master: str | None = None,
    extra: dict[str, str] | None = None,
    clusters: tuple[Cluster, ...] = (),
) -> Any:
    """The job's Spark session. Under spark-submit its master and settings stand; a job run
    directly gets ``master`` (default local) and :func:`job_conf` for it and ``clusters``."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in session_conf(app_name, master, extra, clusters).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


@dataclass(frozen=True)
class ContextSession:
    """A Spark session without Spark SQL, for a job that runs RDD jobs alone (the replicate job:
    its copy tasks, its slots' warm-up, the plan log through the JVM's Hadoop file system). Spark
    SQL's session costs the driver's JVM its first use of Spark SQL's classes: 2.4 s of a job's
    start on this machine, between the context and the first copy task, for nothing the job
    uses. Code written for a session reads ``sparkContext`` from it alike."""

    sparkContext: Any  # SparkSession's name for it

    def stop(self) -> None:
        self.sparkContext.stop()


def build_context_session(
    app_name: str, master: str | None = None, clusters: tuple[Cluster, ...] = ()
) -> ContextSession:
    """As :func:`build_session`, without Spark SQL (:class:`ContextSession`)."""
    from pyspark import SparkConf, SparkContext

    conf = SparkConf().setAll(list(session_conf(app_name, master, None, clusters).items()))
    context = SparkContext.getOrCreate(conf)
    context.setLogLevel("WARN")
    return ContextSession(context)


def session_conf(
    app_name: str, master: str | None, extra: dict[str, str] | None, clusters: tuple[Cluster, ...]
) -> dict[str, str]:
    """A job's Spark settings (its name and master among them); sets the environment a job run
    directly needs before its JVM starts."""
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines outlive pytest's capture streams
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # started by spark-submit, whose JVM runs already
    conf = {"spark.app.name": app_name, **SESSION_CONF}
    if not submitted:
        conf.update(job_conf(master, clusters=clusters))
        # PySpark's workers run $PYSPARK_PYTHON (spark-submit sets it from spark.pyspark.python).
        os.environ.setdefault("PYSPARK_PYTHON", conf["spark.pyspark.python"])
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if is_local(master):  # read when the JVM starts: stay on loopback
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if master:
        conf["spark.master"] = master
    elif not submitted:
        # Under spark-submit its --master wins; SparkConf() cannot tell before a context exists
        # (it does not see the submitted settings), so never set a default over it.
        conf["spark.master"] = DEFAULT_MASTER
    return {**conf, **(extra or {})}


def shipped_config(path: str | None) -> str | None:
    """The configuration file a job reads: ``path``, or, when the driver runs in the cluster
    (cluster deploy mode), the copy spark-submit shipped into its working folder (``--files``)."""
    if path and not Path(path).exists() and Path(Path(path).name).is_file():
        return Path(path).name
    return path
