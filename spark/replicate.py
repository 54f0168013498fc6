"""Replicate one flow's topics from its source to its target cluster, exactly once.

    spark-submit spark/replicate.py --source us-west --target us-east --mode available-now
    srm-control run replicate --source us-west --target us-east --mode continuous

``available-now`` copies what the source holds when it starts and stops (scheduled runs,
``airflow dags test``); ``continuous`` plans a micro-batch every second until stopped.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from srm.config import load_config
from srm.errors import ConfigError, SrmError
from srm.sparkapp import await_query, build_session, start_replication


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="replicate.py", description=__doc__.split("\n")[0])
    parser.add_argument("--source", required=True, help="source cluster alias")
    parser.add_argument("--target", required=True, help="target cluster alias")
    parser.add_argument("--mode", choices=("continuous", "available-now"), default="continuous")
    parser.add_argument("--config", help="configuration file (default: $SRM_CONFIG or conf/srm.yaml)")
    parser.add_argument("--checkpoint", help="Spark checkpoint folder (default: storage.checkpoints/<flow>)")
    parser.add_argument("--trigger-seconds", type=float, default=1.0, help="continuous mode: seconds between batches")
    parser.add_argument("--master", help="Spark master (default: local[*, 4] unless spark-submit sets one)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)
    try:
        config = load_config(args.config, strict=True)
        flow = config.flow(args.source, args.target)
        spark = build_session(f"srm replicate {flow.name}", args.master)
        query = start_replication(
            spark, config, flow, args.mode, checkpoint=args.checkpoint, trigger_seconds=args.trigger_seconds
        )
        await_query(query)
    except ConfigError as exc:
        print(f"error: {len(exc.issues)} problem(s) in the configuration:\n{exc}", file=sys.stderr)
        return 1
    except SrmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
