"""``srm-control topics|groups``: SRM's allow/deny list verbs, stored in ``srm-control.internal``."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from srm.config import load_config
from srm.config.model import Flow, SrmConfig
from srm.errors import NotConfiguredError, SrmError
from srm.kafka.control_lists import Kind, Lists, read_lists, write_lists


def configured_flow(config: SrmConfig, source: str, target: str) -> Flow:
    """The flow source->target; an unknown alias or a missing flow is one clear error."""
    aliases = [c.alias for c in config.clusters]
    for alias in (source, target):
        if alias not in aliases:
            raise NotConfiguredError(f"unknown cluster alias {alias!r} in {config.file} (known: {', '.join(aliases)})")
    return config.flow(source, target)


def reachable(config: SrmConfig, *aliases: str) -> None:
    """Fail with one line naming the bootstrap servers unless every cluster answers."""
    from srm.kafka.clients import check_reachable

    for alias in aliases:
        check_reachable(config.cluster(alias), timeout_s=10)


def entries(value: str | None) -> list[str]:
    """A comma list of names or regexes, each checked to compile."""
    out = [e.strip() for e in (value or "").split(",") if e.strip()]
    for entry in out:
        try:
            re.compile(entry)
        except re.error as exc:
            raise SrmError(f"invalid regex {entry!r}: {exc}") from None
    return out


def yaml_lists(flow: Flow, kind: Kind) -> Lists:
    s = flow.settings
    return Lists(s.topics, s.topics_exclude) if kind == "topics" else Lists(s.groups, s.groups_exclude)


def change(stored: Lists, configured: Lists, args: argparse.Namespace, file: str) -> Lists:
    allow, deny = list(stored.allow), list(stored.deny)
    for wanted, current, in_yaml, verb in (
        (entries(args.add), allow, configured.allow, None),
        (entries(args.add_blacklist), deny, configured.deny, None),
        (entries(args.remove), allow, configured.allow, "whitelist"),
        (entries(args.remove_blacklist), deny, configured.deny, "blacklist"),
    ):
        for entry in wanted:
            if verb is None:
                if entry not in current and entry not in in_yaml:
                    current.append(entry)
            elif entry in current:
                current.remove(entry)
            elif entry in in_yaml:
                raise SrmError(f"{entry!r} is in the {verb} of {file}, not srm-control's: edit the YAML to remove it")
            else:
                print(f"warning: {entry!r} is not in the {verb}", file=sys.stderr)
    return Lists(tuple(allow), tuple(deny))


def run(args: argparse.Namespace, kind: Kind) -> dict[str, Any] | None:
    config = load_config(args.config, strict=True)
    flow = configured_flow(config, args.source, args.target)
    entries(",".join(filter(None, (args.add, args.remove, args.add_blacklist, args.remove_blacklist))))
    reachable(config, flow.target)
    target = config.cluster(flow.target)
    configured = yaml_lists(flow, kind)
    stored = read_lists(target, flow)[kind]
    updated = change(stored, configured, args, config.file)
    if updated != stored:
        write_lists(target, flow, kind, updated)
    if args.json:
        return {
            "whitelist": [{"entry": e, "from": "yaml"} for e in configured.allow]
            + [{"entry": e, "from": "srm-control"} for e in updated.allow],
            "blacklist": [{"entry": e, "from": "yaml"} for e in configured.deny]
            + [{"entry": e, "from": "srm-control"} for e in updated.deny],
        }
    mark = f" (from {config.file})"
    lines = ["Current whitelist:", *(e + mark for e in configured.allow), *updated.allow]
    lines += ["Current blacklist:", *(e + mark for e in configured.deny), *updated.deny, "Done."]
    print("\n".join(lines))
    return None


def add_parser(sub: Any, common: argparse.ArgumentParser, kind: Kind, handler: Any) -> None:
    noun = "topic" if kind == "topics" else "consumer group"
    parser = sub.add_parser(
        kind,
        parents=[common],
        help=f"show or change a flow's {noun} allow/deny lists (SRM's whitelist/blacklist)",
        description=f"Change which {kind} a flow replicates while it runs. The lists are stored in "
        f"srm-control.internal on the target and added to the YAML's; running jobs apply a change within seconds.",
    )
    parser.add_argument("--source", required=True, help="source cluster alias")
    parser.add_argument("--target", required=True, help="target cluster alias")
    parser.add_argument("--add", metavar="LIST", help=f"{noun} names or regexes to allow, comma separated")
    parser.add_argument("--remove", metavar="LIST", help="entries to take off the allowlist")
    parser.add_argument("--add-blacklist", metavar="LIST", help=f"{noun} names or regexes to deny")
    parser.add_argument("--remove-blacklist", metavar="LIST", help="entries to take off the denylist")
    parser.add_argument("--list", action="store_true", help="show the lists (also shown after every change)")
    parser.set_defaults(handler=handler)
