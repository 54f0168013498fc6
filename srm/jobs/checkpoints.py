"""One checkpoint pass of a flow: translate consumer-group offsets exactly, write MM2 checkpoints.

    spark-submit srm/jobs/checkpoints.py --source us-west --target us-east
    srm-control run checkpoints --source us-west --target us-east

Airflow runs it every ``emit.checkpoints.interval.seconds``. Forward checkpoints go to
``<source>.checkpoints.internal`` on the target, failback checkpoints to
``<target>.checkpoints.internal`` on the source; with ``sync.group.offsets.enabled`` idle target
groups get the translated offsets. The pass talks to the clusters and the warehouse alone:
spark-submit runs it (the DAG's task, its logs and its connection are the replicate job's), but it
starts no Spark session, so it takes no executors from the Spark cluster.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from srm.errors import SrmError
from srm.jobs.job import exit_status, job_flow, start_logging
from srm.offsets.checkpointing import CheckpointPass


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="checkpoints.py", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--source", required=True, help="source cluster alias")
    parser.add_argument("--target", required=True, help="target cluster alias")
    parser.add_argument("--config", help="configuration file (default: $SRM_CONFIG or conf/srm.yaml)")
    parser.add_argument(
        "--no-sync",
        action="store_true",
        help="skip the group offset sync (the Airflow DAG runs it as a task of its own)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    start_logging()
    try:
        config, flow = job_flow(args)
        CheckpointPass(config, flow, sync=not args.no_sync).run()
    except SrmError as exc:
        return exit_status(exc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
