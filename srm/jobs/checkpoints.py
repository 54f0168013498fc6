"""One checkpoint pass of a flow: translate consumer-group offsets exactly, write MM2 checkpoints.

    spark-submit srm/jobs/checkpoints.py --source us-west --target us-east
    srm-control run checkpoints --source us-west --target us-east

Airflow runs it every ``emit.checkpoints.interval.seconds``. Forward checkpoints go to
``<source>.checkpoints.internal`` on the target, failback checkpoints to
``<target>.checkpoints.internal`` on the source; with ``sync.group.offsets.enabled`` idle target
groups get the translated offsets.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from srm.config import load_config
from srm.errors import ConfigError, SrmError
from srm.offsets.checkpointing import CheckpointPass
from srm.spark.session import build_session, shipped_config


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="checkpoints.py", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--source", required=True, help="source cluster alias")
    parser.add_argument("--target", required=True, help="target cluster alias")
    parser.add_argument("--config", help="configuration file (default: $SRM_CONFIG or conf/srm.yaml)")
    parser.add_argument("--master", help="Spark master (default: local[*, 4] unless spark-submit sets one)")
    parser.add_argument(
        "--no-sync",
        action="store_true",
        help="skip the group offset sync (the Airflow DAG runs it as a task of its own)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_config(shipped_config(args.config), strict=True)
        flow = config.flow(args.source, args.target)
        spark = build_session(
            f"srm checkpoints {flow.name}",
            args.master,
            clusters=config.flow_clusters(flow),
        )
        CheckpointPass(spark, config, flow, sync=not args.no_sync).run()
    except ConfigError as exc:
        print(f"error: {len(exc.issues)} problem(s) in the configuration:\n{exc}", file=sys.stderr)
        return 1
    except SrmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
