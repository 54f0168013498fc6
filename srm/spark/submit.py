"""The ``spark-submit`` call of a job of ``spark/``: its command line, its driver's JVM options and
its environment."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from srm.config.model import Cluster
from srm.spark.session import DEFAULT_MASTER, MALLOC_ARENA_MAX, is_local, job_conf

# srm/jobs/replicate.py's --mode: continuous (leases, until stopped; its default) or one bounded pass.
REPLICATION_MODES = ("continuous", "available-now")
# The driver's heap starts at this size and never shrinks below it. Left alone, G1 shrank a continuous
# job's driver heap once the job had started, which left its old generation above the occupancy that
# starts a marking cycle: every lease change then cost collections that took both cores of a 2-core
# machine from the copiers. Spark refuses a driver heap under 450 MiB, so the floor is never above
# its -Xmx. Only a continuous replication job gets it: a job without leases (available-now,
# checkpoints) has no such pauses to avoid and would keep ~100 MiB more of its driver resident. Its
# pages are touched at the start (-XX:+AlwaysPreTouch), so that the driver's RSS does not climb over
# the first quarter of an hour as G1 reaches pages it had not used yet, which looked like a leak.
DRIVER_HEAP_FLOOR = "384m"
# A continuous job's driver compiles with C1 only (HotSpot's quick compiler, no profiling, no C2).
# The driver's JVM idles while a lease runs (the copying is in the Python workers) and runs the same
# code once per lease change, so its methods reach the next tier's thresholds lease after lease:
# with tiered compilation C2 took a whole core for ~300 ms at every change, while the brokers and
# copiers waited for the CPU. The measurements of both: docs/benchmarks/lab-notes.md.
LEASE_DRIVER_JVM_OPTIONS = (f"-Xms{DRIVER_HEAP_FLOOR}", "-XX:+AlwaysPreTouch", "-XX:TieredStopAtLevel=1")


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
    """The ``spark-submit`` call for a job of srm.jobs with this interpreter's pyspark (``conf``:
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
        str(job_script(script)),
        *args,
    ]


def job_script(script: str) -> Path:
    """The file spark-submit runs for the job ``script`` (``replicate.py``, ``checkpoints.py``): the
    package's own (srm.jobs), so that an installed package needs no checkout."""
    return Path(__file__).resolve().parents[1] / "jobs" / script


def driver_java_options(script: str = "", args: Sequence[str] = ()) -> str:
    """The driver JVM's options for the job ``script args``: the package's Log4j2 configuration,
    and for a continuous replication job the heap floor (DRIVER_HEAP_FLOOR) and C1 alone
    (LEASE_DRIVER_JVM_OPTIONS)."""
    log4j = Path(__file__).resolve().parent / "log4j2.properties"
    options = [f"-Dlog4j2.configurationFile={log4j}"]
    if holds_leases(script, args):
        options += LEASE_DRIVER_JVM_OPTIONS
    return " ".join(options)


def holds_leases(script: str, args: Sequence[str]) -> bool:
    """Is ``spark/<script> args`` a continuous replication job (its copiers' leases change every
    task.lease.seconds)? srm/jobs/replicate.py runs continuously unless ``--mode`` says otherwise."""
    if script != "replicate.py":
        return False
    modes = argparse.ArgumentParser(add_help=False)
    modes.add_argument("--mode", default=REPLICATION_MODES[0])  # as srm/jobs/replicate.py parses it
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
