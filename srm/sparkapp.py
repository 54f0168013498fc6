"""Spark for the replication jobs: the session, the flow's query, and the spark-submit call.

Python workers must run the project's interpreter (``spark.pyspark.python``): pyspark otherwise
starts ``python3`` from PATH, which lacks this project's packages. The copy runs in Python
workers with librdkafka, so no Kafka jars are needed on the JVM side.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import socket
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from srm import locations
from srm.config.model import Cluster, Flow, SrmConfig
from srm.errors import ReplicationError, SrmError
from srm.paths import project_root

log = logging.getLogger("srm.replicate")

DEFAULT_MASTER = "local[*, 4]"  # all cores; a failed task is retried up to 4 times
# The driver's heap starts at this size and never shrinks below it. Left alone, G1 shrank a
# continuous job's driver heap from its initial 384 MiB to ~115 MiB once the job had started
# (at the end of a marking cycle), which left its old generation above the occupancy that starts
# another cycle: every lease change then cost three collections of 16-27 ms, each taking both
# cores of a 2-core machine from the copiers (``jstat -gc`` on the driver, 2026-11-26). With the
# floor no collection ran during a 70 s load, and the records a lease change slowed past 20 ms
# fell from 2,700-3,400 to 400-700 (``bench.latency --rate 5000`` loads of 70 s; bench/REPORT.md).
# Spark refuses a driver heap under 450 MiB, so the floor is never above its -Xmx. Only a
# continuous replication job gets it: a job without leases (available-now, checkpoints) has no
# such pauses to avoid, and the floor kept ~100 MiB more of its driver resident (peak PSS of
# bench.available_now at 100 B: 827-845 MiB without it, 931-947 with it, 2026-11-27).
# Its pages are touched at the start (-XX:+AlwaysPreTouch): with the floor alone, the driver's RSS
# climbed from ~420 to ~560 MiB over each run's first 15-20 minutes of bench.soak as G1 reached heap
# pages it had not used yet, so memory looked like a leak for the first quarter of an hour.
DRIVER_HEAP_FLOOR = "384m"
# A continuous job's driver compiles with C1 only (HotSpot's quick compiler, no profiling, no C2).
# The driver's JVM idles while a lease runs (the copying is in the Python workers) and runs the
# same code once per lease change, so its methods reach the next tier's thresholds lease after
# lease: with tiered compilation C2 took a whole core for ~300 ms at every change (perf, the 4th
# and 5th lease of a run: 199-249 of ~1,400 samples in 0.9 s, the brokers and copiers waiting
# for the CPU). With C1 alone, 19-28. At 50,000 records/s with 10 s leases, four alternating
# pairs of bench.latency runs: p99 13.5-15.6 ms against 16.6-19.5 (bench/REPORT.md, "Latency").
LEASE_DRIVER_JVM_OPTIONS = (f"-Xms{DRIVER_HEAP_FLOOR}", "-XX:+AlwaysPreTouch", "-XX:TieredStopAtLevel=1")
FAILED_CLOSE_S = 15.0  # ReplicationRun: the accounting's and the stop record's time after a failure
MALLOC_ARENA_MAX = "2"  # glibc arenas per process of a job (submit_environment)
# spark/replicate.py's --mode: continuous (leases, until stopped; its default) or one bounded pass.
REPLICATION_MODES = ("continuous", "available-now")
MASTER_FORMS = "local, local[N], local[N, retries], spark://HOST:PORT[,HOST:PORT], yarn, k8s://URL"


def local_master(tasks: int) -> str:
    """A local master with a task thread for each of ``tasks`` slots at least: continuous mode
    holds one Spark task per slot for a whole lease (Spark's local threads are not CPU
    reservations; the copy runs in Python worker processes)."""
    cores = os.cpu_count() or 1
    return DEFAULT_MASTER if tasks <= cores else f"local[{tasks}, 4]"


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
    (:mod:`srm.job_archive`) and run ``executor_python`` (default ``python3.<minor>``), and
    :func:`secrets_conf` guards the client settings of ``clusters`` they receive. On a standalone
    master an application takes every free core unless told otherwise, so a continuous flow would
    hold the whole cluster: ``cores`` (the flow's ``tasks.max``) caps it (``spark.cores.max``)."""
    from srm import job_archive

    conf = {"spark.pyspark.driver.python": sys.executable, "spark.ui.showConsoleProgress": "false"}
    if is_local(master):
        return {**conf, "spark.pyspark.python": sys.executable}
    conf["spark.executorEnv.MALLOC_ARENA_MAX"] = MALLOC_ARENA_MAX  # as submit_environment's, for remote workers
    if cores is not None and str(master).startswith("spark://"):
        conf["spark.cores.max"] = str(cores)
    return {
        **conf,
        "spark.pyspark.python": executor_python or job_archive.executor_python(),
        **job_archive.spark_conf(job_archive.build()),
        **secrets_conf(str(master), clusters),
    }


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
    logging.getLogger("py4j").setLevel(logging.WARNING)  # its INFO lines outlive pytest's capture streams
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # started by spark-submit, whose JVM runs already
    conf = dict(SESSION_CONF)
    if not submitted:
        conf.update(job_conf(master, clusters=clusters))
        # PySpark's workers run $PYSPARK_PYTHON (spark-submit sets it from spark.pyspark.python).
        os.environ.setdefault("PYSPARK_PYTHON", conf["spark.pyspark.python"])
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if is_local(master):  # read when the JVM starts: stay on loopback
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not submitted:
        # Under spark-submit its --master wins; SparkConf() cannot tell before a context exists
        # (it does not see the submitted settings), so never set a default over it.
        builder = builder.master(DEFAULT_MASTER)
    for key, value in {**conf, **(extra or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark


def shipped_config(path: str | None) -> str | None:
    """The configuration file a job reads: ``path``, or, when the driver runs in the cluster
    (cluster deploy mode), the copy spark-submit shipped into its working folder (``--files``)."""
    if path and not Path(path).exists() and Path(Path(path).name).is_file():
        return Path(path).name
    return path


def checkpoint_dir(config: SrmConfig, flow: Flow) -> str:
    return locations.join(config.storage.checkpoints, f"{flow.source}_to_{flow.target}")


def start_replication(
    spark: Any,
    config: SrmConfig,
    flow: Flow,
    mode: str,
    *,
    checkpoint: str | None = None,
    invoker: str | None = None,
) -> ReplicationRun:
    """Claim ``flow`` and start its query: ``available-now`` drains what is there and
    stops; ``continuous`` runs lease after lease until stopped."""
    from srm import clients
    from srm.internal_topics import ensure_internal_topic, flow_internal_topics
    from srm.replication.batch import BatchRunner
    from srm.replication.lease import LeaseRunner
    from srm.replication.ownership import FlowOwner
    from srm.replication.plan_log import PlanLog
    from srm.replication.planner import Planner
    from srm.replication.query import FlowQuery
    from srm.topics import broker_count

    for alias in (flow.source, flow.target):
        clients.check_reachable(config.cluster(alias))
    for topic in flow_internal_topics(flow):
        admin = clients.admin_client(config.cluster(topic.cluster))
        ensure_internal_topic(admin, topic, broker_count(admin))
    location = checkpoint or checkpoint_dir(config, flow)
    plans = PlanLog(spark, location)
    owner = FlowOwner(config.cluster(flow.target), flow, invoker)
    owner.claim(flow.settings.tasks_max, mode)
    runner_class = LeaseRunner if mode == "continuous" else BatchRunner
    runner = runner_class(spark, config, flow, plans.query_id(), owner)
    planner = Planner(str(Path(config.file).resolve()), flow.source, flow.target, mode)
    query = FlowQuery(spark, planner, runner, plans, mode)
    query.start()
    log.info("flow %s: replication started (%s), checkpoint %s", flow.name, mode, location)
    return ReplicationRun(query, runner, owner)


@dataclass
class ReplicationRun:
    """A running replication query (:class:`~srm.replication.query.FlowQuery`), the runner
    that copies and accounts for its batches, and the flow's ownership."""

    query: Any
    runner: Any
    owner: Any
    released: bool = False
    # wait() (the job's main thread) and stop() (a signal handler's thread) both release the run;
    # the owner's producer must not be driven by both at once.
    _release_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def wait(self) -> None:
        """Until the query ends; its failure becomes the project's own error with the message it carried."""
        from srm.replication.query import query_error

        try:
            while self.query.is_alive():
                self.query.join(1.0)
        finally:
            self._release(failed=self.query.error is not None)
        if self.query.error is not None:
            error = query_error(self.query.error)
            self.runner.states.failed(str(error))  # for the status, however the run was started
            raise error from None

    def stop(self, timeout_s: float = 60.0) -> None:
        """Gracefully: the running lease ends with its copiers committing, then the query stops."""
        self.query.stopping.set()
        request = getattr(self.runner, "request_stop", None)
        if request is not None:
            request()
            self.runner.idle.wait(timeout_s)
        self.query.stop(timeout_s)
        self._release()

    def _release(self, *, failed: bool = False) -> None:
        with self._release_lock:
            if self.released:
                return
            self.released = True
            self._close(failed)

    def _close(self, failed: bool = False) -> None:
        # A failed run (maybe a cluster that does not answer) ends soon: what the accounting has not
        # written, the next run's accounting ingests; a copier that misses the stop record stops
        # after its lease's grace.
        self.runner.close(*((FAILED_CLOSE_S,) if failed else ()))
        try:
            self.owner.stop(
                *((FAILED_CLOSE_S,) if failed else ())
            )  # copiers still running (a failed lease) commit and stop
        except SrmError as exc:  # taken over meanwhile: the new owner's record stays
            log.info("flow %s: not marking the run stopped: %s", self.runner.flow.name, exc)
        self.owner.close()


def await_query(run: ReplicationRun) -> None:
    run.wait()


_OWN_ERROR = re.compile(r"^srm\.errors\.(\w+): (.+)$", re.MULTILINE)
_PYTHON_ERROR = re.compile(r"^([\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)


def user_error(exc: BaseException) -> SrmError:
    """The last error this project raised inside Spark, else the last Python error, else Spark's."""
    from srm import errors

    text = str(exc)
    own = _OWN_ERROR.findall(text)
    if own:
        name, message = own[-1]
        cls = getattr(errors, name, ReplicationError)
        return (
            cls(message) if issubclass(cls, SrmError) and cls is not errors.ConfigError else ReplicationError(message)
        )
    python = _PYTHON_ERROR.findall(text)
    if python:
        name, message = python[-1]
        return ReplicationError(f"{name}: {message}")
    return ReplicationError(text.splitlines()[0] if text else type(exc).__name__)


def spark_submit_command(
    script: str,
    args: list[str],
    master: str | None = None,
    conf: dict[str, str] | None = None,
    *,
    executor_python: str | None = None,
    files: tuple[str, ...] = (),
    clusters: tuple[Cluster, ...] = (),
    cores: int | None = None,
) -> list[str]:
    """The ``spark-submit`` call for a job of ``spark/`` with this interpreter's pyspark (``conf``:
    more Spark settings, e.g. the Python worker profiler; ``files``: shipped to the executors,
    and to the driver in cluster deploy mode; ``clusters``: those the executors connect to;
    ``cores``: the flow's slots, see :func:`job_conf`)."""
    import pyspark

    spark_home = Path(pyspark.__file__).parent
    submit = spark_home / "bin" / "spark-submit"
    settings = {**job_conf(master, executor_python, clusters, cores), **(conf or {})}
    return [
        str(submit),
        "--master",
        master or DEFAULT_MASTER,
        *(arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")),
        *(("--files", ",".join(files)) if files else ()),
        "--driver-java-options",
        driver_java_options(script, args),
        str(project_root() / "spark" / script),
        *args,
    ]


def driver_java_options(script: str = "", args: Sequence[str] = ()) -> str:
    """The driver JVM's options for ``spark/<script> args``: the project's Log4j2 configuration,
    and for a continuous replication job the heap floor (DRIVER_HEAP_FLOOR) and C1 alone
    (LEASE_DRIVER_JVM_OPTIONS)."""
    log4j = project_root() / "conf" / "jvm" / "spark-log4j2.properties"
    options = [f"-Dlog4j2.configurationFile={log4j}"]
    if holds_leases(script, args):
        options += LEASE_DRIVER_JVM_OPTIONS
    return " ".join(options)


def holds_leases(script: str, args: Sequence[str]) -> bool:
    """Is ``spark/<script> args`` a continuous replication job (its copiers' leases change every
    task.lease.seconds)? spark/replicate.py runs continuously unless ``--mode`` says otherwise."""
    if script != "replicate.py":
        return False
    modes = argparse.ArgumentParser(add_help=False)
    modes.add_argument("--mode", default=REPLICATION_MODES[0])  # as spark/replicate.py parses it
    mode: str = modes.parse_known_args(list(args))[0].mode
    return mode == "continuous"


def submit_environment(master: str | None = None) -> dict[str, str]:
    """Environment for spark-submit: pyspark's launcher needs SPARK_HOME and this venv on PATH."""
    import pyspark

    env = dict(os.environ)
    env["SPARK_HOME"] = str(Path(pyspark.__file__).parent)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    # glibc gives every thread that allocates its own arena, up to 8 per core, and keeps what it
    # freed in each; a copier's librdkafka threads buffer a target's outage in them. Capped as Hadoop
    # caps YARN containers (4). Not enough alone: in bench.soak a worker's RSS still stepped up
    # 10-30 MiB at each target restart.
    env.setdefault("MALLOC_ARENA_MAX", MALLOC_ARENA_MAX)
    if is_local(master):  # local[*] runs on this machine: its workers run this interpreter, on loopback
        env["PYSPARK_PYTHON"] = sys.executable
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    return env
