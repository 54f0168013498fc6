"""``srm-control status``: per flow, is it running, how far behind, when did it last checkpoint."""

from __future__ import annotations

import argparse
import time
from typing import Any

from srm import clients
from srm.config import load_config
from srm.config.model import Flow, SrmConfig
from srm.control.lists import configured_flow
from srm.control_lists import read_lists
from srm.errors import SrmError
from srm.failover import partition_lag
from srm.heartbeats import freshness
from srm.replication.selector import TopicSelector
from srm.topics import list_offsets, partition_counts, read_to_end
from srm.warehouse import DATA_LOSS, Warehouse

ALIVE_S = 120.0  # as the heartbeats DAG's stall sensor: a newer replicated heartbeat means running
STATUS_READ_S = 10.0  # reading the newest records of an internal topic


def newest_record_age(cluster: Any, topic: str) -> float | None:
    """Seconds since the newest record of a one-partition internal topic was written (None: empty)."""
    admin = clients.admin_client(cluster)
    if topic not in partition_counts(admin, include_internal=True):
        return None
    end = list_offsets(admin, [(topic, 0)], "latest")[(topic, 0)]
    if end == 0:
        return None
    consumer = clients.consumer(cluster, "__srm.status", **{"enable.partition.eof": True})
    newest = None
    try:
        for message in read_to_end(consumer, topic, 0, STATUS_READ_S, start=max(0, end - 10)):
            newest = message.timestamp()[1]
    finally:
        consumer.close()
    return None if newest is None else time.time() - newest / 1000


def flow_status(config: SrmConfig, flow: Flow) -> dict[str, Any]:
    out: dict[str, Any] = {"flow": flow.name}
    try:
        age = freshness(config.cluster(flow.target), flow).age_s
        out["state"] = "running" if age is not None and age <= ALIVE_S else "not running"
        out["heartbeat_age_s"] = None if age is None else round(age, 1)
        lists = read_lists(config.cluster(flow.target), flow)["topics"]
        selector = TopicSelector(flow, lists.allow, lists.deny)
        topics = {
            t for t in partition_counts(clients.admin_client(config.cluster(flow.source))) if selector.replicates(t)
        }
        lag: dict[str, int] = {}
        for (topic, _), behind in partition_lag(config, flow, topics).items():
            lag[topic] = lag.get(topic, 0) + behind
        out["lag"] = dict(sorted(lag.items()))
        checkpoint = newest_record_age(config.cluster(flow.target), flow.policy.checkpoints_topic(flow.source))
        out["checkpoint_age_s"] = None if checkpoint is None else round(checkpoint, 1)
        losses = Warehouse(config.storage.warehouse).read(DATA_LOSS, flow=flow.name)
        last = max(losses, key=lambda r: str(r.get("detected_at", ""))) if losses else None
        out["last_error"] = _loss_text(last) if last else None
    except SrmError as exc:
        out.setdefault("state", "unknown")
        out["last_error"] = str(exc)
    return out


def _loss_text(row: dict[str, Any]) -> str:
    return (
        f"data loss at {row['detected_at']}: {row['topic']}[{row['partition']}] offsets {row['first_offset']}.."
        f"{row['end_offset'] - 1} ({row['records']} records, {row['reason']})"
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
    found = [flow_status(config, f) for f in flows]
    if args.json:
        return {"flows": found}
    for entry in found:
        print(f"{entry['flow']}: {entry.get('state')}")
        if "heartbeat_age_s" in entry:
            print(f"  last replicated heartbeat: {_age(entry['heartbeat_age_s'])}")
        if "checkpoint_age_s" in entry:
            print(f"  last checkpoint: {_age(entry['checkpoint_age_s'])}")
        for topic, behind in entry.get("lag", {}).items():
            print(f"  lag {topic}: {behind}")
        print(f"  last error: {entry.get('last_error') or 'none'}")
    return None


def add_parser(sub: Any, common: argparse.ArgumentParser) -> None:
    parser = sub.add_parser(
        "status",
        parents=[common],
        help="per flow: running or not, lag per topic, last heartbeat, last checkpoint, last error",
        description="Show every enabled flow (or the one of --source/--target): whether it runs (a replicated "
        "heartbeat younger than 2 minutes), records not yet copied per topic, the age of the last checkpoint, "
        "and the last error recorded.",
    )
    parser.add_argument("--source", help="source cluster alias")
    parser.add_argument("--target", help="target cluster alias")
    parser.set_defaults(handler=status)
