"""``srm-control status``: per flow, is it running, how far behind, when did it last checkpoint."""

from __future__ import annotations

import argparse
from typing import Any

from srm.config import load_config
from srm.control.lists import configured_flow
from srm.errors import SrmError
from srm.operations.health import flow_health

# (help, description) of the subcommand
HELP = (
    "per flow: running or not, lag per topic, last heartbeat, last checkpoint, last error",
    "Show every enabled flow (or the one of --source/--target): whether it runs (a replicated heartbeat "
    "younger than 2 minutes), records not yet copied per topic, the age of the last checkpoint, and the last "
    "error recorded.",
)


def _age(value: float | None) -> str:
    return "never" if value is None else f"{value:.0f} s ago"


def status(args: argparse.Namespace) -> dict[str, Any] | None:
    config = load_config(args.config, strict=True)
    if args.source or args.target:
        if not (args.source and args.target):
            raise SrmError("give both --source and --target, or neither (all flows)")
        flows = [configured_flow(config, args.source, args.target)]
    else:
        flows = list(config.enabled_flows())
    found = [flow_health(config, f).as_dict() for f in flows]
    if args.json:
        return {"flows": found}
    for entry in found:
        since = f" since {entry['since']}" if entry["since"] else ""
        print(f"{entry['flow']}: {entry['state']}{since} ({entry['reason']})")
        print(f"  last replicated heartbeat: {_age(entry['heartbeat_age_s'])}")
        print(f"  last checkpoint: {_age(entry['checkpoint_age_s'])}")
        for topic, behind in entry["lag"].items():
            print(f"  lag {topic}: {behind}")
        error = entry["last_error"]
        print(f"  last error: {error['message'] + ' at ' + error['at'] if error else 'none'}")
        if error and error.get("log_url"):
            print(f"  log: {error['log_url']}")
    return None
