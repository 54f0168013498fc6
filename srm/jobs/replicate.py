"""Replicate one flow's topics from its source to its target cluster, exactly once.

    spark-submit srm/jobs/replicate.py --source us-west --target us-east --mode available-now
    srm-control run replicate --source us-west --target us-east --mode continuous

``available-now`` copies what the source holds when it starts and stops (scheduled runs,
``airflow dags test``); ``continuous`` copies until stopped, committing a transaction every
``transaction.interval.ms``. SIGTERM or Ctrl-C stops it gracefully (the copiers commit what they
hold), also when sent to the whole process group, whose spark-submit JVM ignores them
(srm.spark.driver); a second Ctrl-C stops it at once, which loses nothing either.

Exit status: 0 done, 1 an error (the message says what and where), 3 another run took the flow
over (not worth retrying while that run goes on).
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from srm.errors import SrmError
from srm.jobs.job import exit_status, flow_session, start_logging
from srm.replication.launch import ReplicationRun, start_replication
from srm.spark.submit import REPLICATION_MODES


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="replicate.py", description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="source cluster alias")
    parser.add_argument("--target", required=True, help="target cluster alias")
    parser.add_argument("--mode", choices=REPLICATION_MODES, default=REPLICATION_MODES[0])
    parser.add_argument("--config", help="configuration file (default: $SRM_CONFIG or conf/srm.yaml)")
    parser.add_argument("--plan-log", help="where the plan log is (default: storage.plan_logs/<source>_to_<target>)")
    parser.add_argument("--master", help="Spark master (default: local[*, 4] unless spark-submit sets one)")
    parser.add_argument("--invoker", help="who runs this job, shown to a run that takes the flow over")
    return parser.parse_args(argv)


class StopOnSignals:
    """SIGTERM/SIGINT: stop gracefully in the background; a second SIGINT: exit at once.

    Installed first thing (the driver starts with both ignored, see srm.spark.driver) and again once
    the run has started (pyspark's SparkContext installs a SIGINT handler of its own, which cancels
    every Spark job: the copiers' too). A signal that comes while the run starts stops it as soon as
    it has started."""

    def __init__(self) -> None:
        self.run: ReplicationRun | None = None
        self.requested = threading.Event()
        self.stopping = False
        self.install()

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self.graceful)
        signal.signal(signal.SIGINT, signal.default_int_handler if self.requested.is_set() else self.graceful)

    def started(self, run: ReplicationRun) -> ReplicationRun:
        self.run = run
        self.install()
        if self.requested.is_set():
            self.begin_stop()
        return run

    def graceful(self, signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if self.requested.is_set():  # the same stop twice: to the process group and from Airflow's on_kill
            return
        self.requested.set()
        if self.run is None:
            logging.getLogger("srm.replicate").info("signal %d: stopping as soon as the run has started", signum)
            return
        logging.getLogger("srm.replicate").info("signal %d: stopping after the copiers commit", signum)
        self.begin_stop()

    def begin_stop(self) -> None:
        """Signal handlers and ``started`` both run on the main thread: no lock needed to stop once."""
        if self.run is not None and not self.stopping:
            self.stopping = True
            threading.Thread(target=self.run.stop, name="srm-stop", daemon=True).start()


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start_logging()
    stop = StopOnSignals()
    try:
        config, flow, spark = flow_session(args, "replicate")
        run = start_replication(spark, config, flow, args.mode, plan_log=args.plan_log, invoker=args.invoker)
        stop.started(run).wait()
    except SrmError as exc:
        return exit_status(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
