"""Replicate one flow's topics from its source to its target cluster, exactly once.

    spark-submit srm/jobs/replicate.py --source us-west --target us-east --mode available-now
    srm-control run replicate --source us-west --target us-east --mode continuous

``available-now`` copies what the source holds when it starts and stops (scheduled runs,
``airflow dags test``); ``continuous`` copies until stopped, committing a transaction every
``transaction.interval.ms``. SIGTERM or Ctrl-C stops it gracefully (the copiers commit what they
hold); a second Ctrl-C stops it at once, which loses nothing either.

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


def stop_on_signals(run: ReplicationRun) -> None:
    """SIGTERM/SIGINT: stop gracefully in the background; a second SIGINT: exit at once."""

    def graceful(signum: int, frame: FrameType | None) -> None:
        logging.getLogger("srm.replicate").info("signal %d: stopping after the copiers commit", signum)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        threading.Thread(target=run.stop, name="srm-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, graceful)
    signal.signal(signal.SIGINT, graceful)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start_logging()
    try:
        config, flow, spark = flow_session(args, "replicate")
        run = start_replication(spark, config, flow, args.mode, plan_log=args.plan_log, invoker=args.invoker)
        stop_on_signals(run)
        run.wait()
    except SrmError as exc:
        return exit_status(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
