"""``python -m bench.soak``: see the package's note."""

from __future__ import annotations

import argparse
import json
import logging
import shlex
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.soak import report
from bench.soak.faults import KINDS
from bench.soak.runner import Options, Soak


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=(__doc__ or "").strip())
    parser.add_argument("--minutes", type=float)
    parser.add_argument("--rate", type=int, default=5000, help="records/s of 100 B (default %(default)s)")
    parser.add_argument("--topics", type=int, default=16)
    parser.add_argument("--partitions", type=int, default=64, help="over all topics (default %(default)s)")
    parser.add_argument("--groups", type=int, default=200)
    parser.add_argument("--retention-minutes", type=float, default=30.0, help="the source topics' retention.ms")
    parser.add_argument("--faults", type=int, default=24, help="how many, evenly spread (default %(default)s)")
    parser.add_argument("--kinds", default=",".join(KINDS), help="comma-separated, cycled (default: all)")
    parser.add_argument("--tasks", type=int, default=2, help="the flow's tasks.max (default %(default)s)")
    parser.add_argument("--warmup-seconds", type=float, default=300.0, help="before the first fault")
    parser.add_argument("--prune-seconds", type=float, default=300.0, help="how often the history is pruned")
    parser.add_argument("--checkpoint-seconds", type=float, default=60.0, help="emit.checkpoints.interval.seconds")
    parser.add_argument("--linger-ms", type=int, help="the flow's transaction.linger.ms (default: the flow's)")
    parser.add_argument("--interval-ms", type=int, help="the flow's transaction.interval.ms (default: the flow's)")
    parser.add_argument("--out", type=Path, help="folder for soak.json, SOAK.md and soak.png")
    parser.add_argument("--workdir", type=Path, help="keep clusters, logs, warehouse here (default: a temp folder)")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    parser.add_argument(
        "--rerender",
        type=Path,
        metavar="DIR",
        help="no soak: write DIR/SOAK.md and DIR/soak.png again from DIR/soak.json",
    )
    args = parser.parse_args()
    if args.minutes is None and args.rerender is None:
        parser.error("--minutes is required (or --rerender DIR)")
    unknown = set(args.kinds.split(",")) - set(KINDS)
    if unknown:
        parser.error(f"--kinds: unknown {sorted(unknown)}; known: {', '.join(KINDS)}")
    return args


def write(out: Path, result: dict[str, Any]) -> None:
    """soak.json, soak.png and SOAK.md in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "soak.json").write_text(json.dumps(result, indent=2, default=str))
    plot = None
    if result["samples"]:
        report.plot(result["samples"], out / "soak.png")
        plot = "soak.png"
    (out / "SOAK.md").write_text(report.section(result, result["command"], plot))


def main() -> None:
    args = arguments()
    if args.rerender:
        write(args.rerender, json.loads((args.rerender / "soak.json").read_text()))
        return
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s %(message)s")
    # The harness's own clients meet every broker restart of the schedule: librdkafka's connection
    # errors then are expected; what fails for good raises.
    logging.getLogger("srm.librdkafka").setLevel(logging.CRITICAL)
    options = Options(
        args.minutes,
        args.rate,
        args.topics,
        args.partitions,
        args.groups,
        args.retention_minutes,
        args.faults,
        tuple(args.kinds.split(",")),
        args.tasks,
        args.warmup_seconds,
        args.prune_seconds,
        args.checkpoint_seconds,
        args.linger_ms,
        args.interval_ms,
    )
    # SIGTERM ends the soak as Ctrl-C does: its clusters and its job are stopped on the way out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        result = Soak(options, workdir).run().summary()
    result["slopes"] = report.slopes(result["samples"])
    command = "python -m bench.soak " + shlex.join(sys.argv[1:])
    result["command"] = command
    if args.out:
        write(args.out, result)
    if args.json:
        print(json.dumps(result, default=str))
    else:
        print(report.section(result, command, None))


if __name__ == "__main__":
    main()
