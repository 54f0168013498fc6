"""``srm-control takeover``: start a flow exactly where a stopped MirrorMaker 2 left it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from srm.config import load_config
from srm.console import print_table

# (help, description) of the subcommand
HELP = (
    "start a flow where a stopped MirrorMaker 2 left it (dry run unless --apply)",
    "Read where MirrorMaker 2's flow SOURCE->TARGET got to (its Connect offsets on the target, named by the "
    "properties file), line every remote partition up with its source record by record, and print per partition "
    "MM2's committed position, ours and what MM2 copied twice or past its commit. --apply writes our progress and "
    "the exact offset runs of MM2's copies, so the flow copies no record twice and skips none, and checkpoints "
    "translate the groups of the MM2 era exactly. Stop MM2 first; the flow must never have run.",
)


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    from srm.control.parsers import flow_parser

    parser = flow_parser(sub, common, "takeover", *HELP, handler=takeover)
    parser.add_argument(
        "--from-mm2", required=True, type=Path, metavar="FILE", help="the mm2.properties MirrorMaker 2 ran with"
    )
    parser.add_argument("--apply", action="store_true", help="write the progress (default: dry run)")


def takeover(args: argparse.Namespace) -> dict[str, Any] | None:
    from srm.operations import takeover as taking

    config = load_config(args.config, strict=True)
    flow = config.flow(args.source, args.target)
    if args.apply:
        taking.refuse_if_started(config, flow)  # before reading every remote topic
    plans = taking.plan(config, flow, args.from_mm2)
    if args.apply:
        taking.apply(config, flow, plans)
    partitions = [p.as_dict() for p in plans]
    if args.json:
        return {"flow": flow.name, "applied": args.apply, "partitions": partitions}
    state = "applied: the flow starts at 'ours'" if args.apply else "dry run: nothing written (--apply writes it)"
    print(f"takeover of {flow.name} from MirrorMaker 2 ({args.from_mm2}), {state}")
    columns = (
        "topic",
        "partition",
        "MM2 committed",
        "ours",
        "past MM2's commit",
        "on target",
        "MM2 duplicates",
        "without original",
    )
    rows = [
        (
            p.topic,
            p.partition,
            "-" if p.mm2_next is None else p.mm2_next,
            p.next_offset,
            "-" if p.past_commit is None else p.past_commit,
            p.copied,
            p.duplicated,
            p.unmatched,
        )
        for p in plans
    ]
    print_table(columns, rows, right=columns[1:])
    duplicated, beyond = sum(p.duplicated for p in plans), sum(p.past_commit or 0 for p in plans)
    print(
        f"{len(plans)} partition(s); MM2 wrote {duplicated} record(s) twice (at-least-once: already on the target, "
        f"not repaired); {beyond} record(s) were copied past MM2's last commit (a restarted MM2 would copy them again; "
        "ours does not); 'without original': records on the target whose original the source no longer holds "
        "(retention, compaction) or that MM2 did not write"
    )
    return None
