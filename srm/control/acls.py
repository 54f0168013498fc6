"""``srm-control acls``: the least-privilege ACLs a flow's principals need, per cluster."""

from __future__ import annotations

import argparse
from dataclasses import asdict
from typing import Any

from srm.config import load_config
from srm.console import print_table
from srm.operations.acls import flow_grants

# (help, description) of the subcommand
HELP = (
    "list the ACLs a flow's principals need on each cluster",
    "Print the least-privilege ACLs the replicator's principal needs on the source and the target of a flow "
    "(what each is needed for); grant them with kafka-acls or your platform's tooling.",
)


def acls(args: argparse.Namespace) -> dict[str, Any] | None:
    config = load_config(args.config, strict=True)
    flow = config.flow(args.source, args.target)
    grants = flow_grants(flow)
    principals = {alias: config.cluster(alias).principal() for alias in (flow.source, flow.target)}
    if args.json:
        return {"flow": flow.name, "principals": principals, "acls": [asdict(g) for g in grants]}
    print(f"ACLs (ALLOW, host *) of flow {flow.name}; the principals:")
    for alias, principal in principals.items():
        print(f"  {alias}: {principal}")
    print_table(
        ("cluster", "resource", "pattern", "name", "operations", "needed for"),
        [(g.cluster, g.resource, g.pattern, g.name, ", ".join(g.operations), g.why) for g in grants],
    )
    return None
