"""``srm-control offsets | translate | failover | failback``: translated offsets for people and tools."""

from __future__ import annotations

import argparse
import functools
import json
from typing import Any

from srm.config import load_config
from srm.control import parsers
from srm.control.lists import configured_flow, reachable
from srm.errors import SrmError
from srm.offsets.api import Direction, Translator
from srm.offsets.api import translate as translate_offsets
from srm.operations.failover import GroupPlan, apply, plan, plan_failback, table


def group_names(value: str) -> list[str]:
    names = [g.strip() for g in value.split(",") if g.strip()]
    if not names:
        raise SrmError("--group needs at least one group name")
    return names


def export(args: argparse.Namespace) -> dict[str, Any] | None:
    """CSV for ``kafka-consumer-groups --reset-offsets --from-file`` on the target, from the
    checkpoints on the target (so it works with the source down), target topic names."""
    config = load_config(args.config, strict=True)
    flow = configured_flow(config, args.source, args.target)
    if not args.export:
        raise SrmError("offsets needs --export (the only action SRM's offsets command has)")
    groups = group_names(args.group)
    reachable(config, flow.target)
    rows = Translator(config, flow).groups(groups)
    if args.json:
        return {g: [vars(t) for t in found] for g, found in rows.items()}
    for group, found in rows.items():
        for t in found:
            prefix = f"{group}," if len(groups) > 1 else ""
            print(f"{prefix}{t.topic},{t.partition},{t.offset}")
    return None


def translate(args: argparse.Namespace) -> dict[str, Any] | None:
    config = load_config(args.config, strict=True)
    flow = configured_flow(config, args.source, args.target)
    direction: Direction = "backward" if args.reverse else "forward"
    reachable(config, flow.target, *([flow.source] if args.live or args.reverse else []))
    found = translate_offsets(
        config,
        flow,
        direction,
        groups=group_names(args.group) if args.group else None,
        topic=args.topic,
        partition=args.partition,
        offset=args.offset,
        live=args.live,
    )
    if args.json:
        return {"direction": direction, "offsets": [vars(t) for t in found]}
    for t in found:
        who = f"{t.group}: " if t.group else ""
        print(f"{who}{t.from_topic}[{t.partition}]@{t.from_offset} -> {t.topic}[{t.partition}]@{t.offset}")
    return None


def failover(args: argparse.Namespace, back: bool = False) -> dict[str, Any] | None:
    config = load_config(args.config, strict=True)
    flow = configured_flow(config, args.source, args.target)
    reachable(config, flow.target, *([flow.source] if back or args.planned else []))
    if back:
        plans = plan_failback(config, flow, args.group)
    else:
        plans = plan(config, flow, args.group, "planned" if args.planned else "unplanned")
    if args.apply:
        apply(config, plans)
    else:
        for entry in plans:
            entry.outcome = "dry run: not applied (--apply writes it)"
    refused = [p.group for p in plans if p.outcome.startswith("refused")]
    if args.json:
        print(json.dumps({"applied": bool(args.apply), "groups": [_plan_json(p) for p in plans]}, indent=2))
    else:
        print("\n".join(table(plans)))
    if refused:
        reasons = "; ".join(f"{p.group}: {p.outcome}" for p in plans if p.group in refused)
        raise SrmError(f"nothing written for {len(refused)} group(s): {reasons}")
    return None  # printed above, JSON included


def _plan_json(entry: GroupPlan) -> dict[str, Any]:
    return {
        "group": entry.group,
        "cluster": entry.cluster,
        "outcome": entry.outcome,
        "offsets": [vars(t) for t in entry.offsets],
        "current": [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(entry.current.items())],
    }


def add_parsers(sub: Any, common: argparse.ArgumentParser) -> None:
    flow_parser = functools.partial(parsers.flow_parser, sub, common)

    offsets = flow_parser(
        "offsets",
        "export translated offsets as CSV for kafka-consumer-groups",
        "Print the groups' translated offsets on the target as CSV that `kafka-consumer-groups --reset-offsets "
        "--from-file` accepts (topic,partition,offset; group,topic,partition,offset for several groups). Reads the "
        "checkpoints on the target: works while the source is down.",
    )
    offsets.add_argument("--group", required=True, help="group name(s), comma separated")
    offsets.add_argument("--export", action="store_true", help="print the CSV")
    offsets.set_defaults(handler=export)

    trans = flow_parser(
        "translate",
        "translate one offset or a whole group, either direction",
        "Where a consumer resumes on the other cluster: a group (from the checkpoints, or --live from the "
        "group's committed offsets) or one --topic/--partition/--offset; --reverse translates target -> source.",
    )
    trans.add_argument("--group", help="group name(s), comma separated")
    trans.add_argument("--topic", help="topic on the cluster the consumer leaves")
    trans.add_argument("--partition", type=int)
    trans.add_argument("--offset", type=int)
    trans.add_argument("--reverse", action="store_true", help="target -> source (failback)")
    trans.add_argument("--live", action="store_true", help="translate the group's committed offsets, not checkpoints")
    trans.set_defaults(handler=translate)

    for name, back in (("failover", False), ("failback", True)):
        parser = flow_parser(
            name,
            f"move consumer groups {'back to the source' if back else 'to the target'} (dry run unless --apply)",
            (
                "Translate groups that consumed remote topics on the target back to the source topics and, with "
                "--apply, write them into the source's groups."
                if back
                else "Translate the groups' offsets (from the checkpoints; --planned: wait for lag 0 and use the live "
                "offsets) and, with --apply, write them into the target's groups."
            )
            + " Groups with members are refused with the reason; nothing is written to them.",
        )
        parser.add_argument("--group", required=True, help="group names, comma separated, or one regex")
        parser.add_argument("--apply", action="store_true", help="write the offsets (default: dry run)")
        if not back:
            parser.add_argument("--planned", action="store_true", help="source up: wait until lag is 0 first")
        parser.set_defaults(handler=(lambda a: failover(a, back=True)) if back else failover)
