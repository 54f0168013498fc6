"""``srm-control``: SRM's command-line tool (topics, groups, offsets) plus status, translate,
failover/failback, validation, MM2 import, Spark jobs and the local clusters.

Every command takes ``--config``, ``--json`` and ``--debug``; errors print one clear message and
exit non-zero (a traceback only with ``--debug``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from srm.control import acls, commands, lists, offsets, status, takeover
from srm.control.parsers import flow_parser
from srm.errors import ConfigError, SrmError
from srm.spark.submit import REPLICATION_MODES

EXIT_ERROR = 1
EXIT_USAGE = 2

Handler = Callable[[argparse.Namespace], Any]


def _common() -> argparse.ArgumentParser:
    # No defaults here: a subcommand's parser would reset what was given before the subcommand
    # (`srm-control --config f.yaml run ...`); the top-level parser sets them once.
    common = argparse.ArgumentParser(add_help=False, argument_default=argparse.SUPPRESS)
    common.add_argument("--config", metavar="FILE", help="configuration file (default: $SRM_CONFIG or conf/srm.yaml)")
    flag = {"action": "store_true", "default": argparse.SUPPRESS}
    common.add_argument("--json", **flag, help="print machine-readable JSON")  # type: ignore[arg-type]
    common.add_argument("--debug", **flag, help="show tracebacks and debug logs")  # type: ignore[arg-type]
    return common


COMMON_DEFAULTS = {"config": None, "json": False, "debug": False}


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    args = parser.parse_args(argv)
    for key, value in COMMON_DEFAULTS.items():
        if not hasattr(args, key):
            setattr(args, key, value)
    return args


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="srm-control",
        description="Manage Kafka replication flows described in conf/srm.yaml (SRM/MirrorMaker 2 compatible).",
        parents=[common],
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    validate = sub.add_parser(
        "validate",
        parents=[common],
        help="check the configuration and summarise it",
        description="Check the configuration file; list every problem with file, "
        "line and key, or print a summary of clusters and flows.",
    )
    validate.set_defaults(handler=commands.validate)

    imp = sub.add_parser(
        "import-mm2",
        parents=[common],
        help="convert an mm2.properties file to YAML",
        description="Print the YAML equivalent of a MirrorMaker 2 mm2.properties file; "
        "warnings about what cannot be mapped go to stderr.",
    )
    imp.add_argument("properties", metavar="FILE.properties")
    imp.set_defaults(handler=commands.import_mm2)

    run = sub.add_parser(
        "run",
        parents=[common],
        help="run a Spark job of a flow outside Airflow",
        description="Build the spark-submit call of a flow's Spark job and run it in the foreground; Ctrl-C stops it.",
    )
    run.add_argument("job", choices=("replicate", "checkpoints"), help="replicate: copy topics; checkpoints: one pass")
    run.add_argument("--source", required=True, help="source cluster alias")
    run.add_argument("--target", required=True, help="target cluster alias")
    run.add_argument(
        "--mode",
        choices=REPLICATION_MODES,
        default="available-now",
        help="replicate only: continuous runs until stopped; available-now copies what is there and stops",
    )
    run.add_argument("--master", help="Spark master (default local[*, 4])")
    run.add_argument("--dry-run", action="store_true", help="print the spark-submit command instead of running it")
    run.set_defaults(handler=commands.run)

    lists.add_parser(sub, common, "topics", lambda a: lists.run(a, "topics"))
    lists.add_parser(sub, common, "groups", lambda a: lists.run(a, "groups"))
    offsets.add_parsers(sub, common)
    flow_parser(sub, common, "status", *status.HELP, required=False, handler=status.status)
    flow_parser(sub, common, "acls", *acls.HELP, handler=acls.acls)
    takeover.add_parser(sub, common)

    local = sub.add_parser(
        "local",
        parents=[common],
        help="run the local development clusters",
        description="Start, stop or show the clusters the configuration marks `local`.",
    )
    local.add_argument("action", choices=("up", "down", "status"))
    local.set_defaults(handler=commands.local)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(build_parser(), argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.WARNING, format="%(levelname)s %(name)s: %(message)s"
    )
    if args.debug:
        logging.getLogger("srm.librdkafka").setLevel(logging.DEBUG)
    handler: Handler = args.handler
    try:
        result = handler(args)
    except ConfigError as exc:
        print(f"error: {len(exc.issues)} problem(s) in the configuration:", file=sys.stderr)
        for issue in exc.issues:
            print(f"  {issue}", file=sys.stderr)
        return _fail(args, exc)
    except SrmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return _fail(args, exc)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if args.json and result is not None:
        print(json.dumps(result, indent=2, default=str))
    return 0


def _fail(args: argparse.Namespace, exc: Exception) -> int:
    if args.debug:
        raise exc
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
