"""Failover accuracy: records a failed-over consumer re-reads or skips, MM2's checkpoints against ours.

    .venv/bin/python -m bench.failover_accuracy [--per-partition 10000] [--partitions 8]

A fresh topic whose records carry their source offset in the value; a group commits a different
position on each partition; MirrorMaker 2 (defaults, checkpoints every second) and our flow
(replicate available-now, one checkpoint pass) each replicate it and write checkpoints. A consumer
that starts on the target at a checkpoint's downstream offset first reads the record with source
offset S; the group had committed U: it re-reads U - S records if S < U and skips S - U if S > U.
Prints the figures as JSON (``bench.run`` puts them in the report).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.available_now import flow_config
from bench.common import fill_partitions
from bench.mm2 import mm2_properties
from srm.config import load_config
from srm.config.model import Cluster
from srm.devenv.jvm import kafka_command
from srm.kafka import clients
from srm.kafka.partitions import read_to_end
from srm.kafka.topics import ensure_topic, partition_counts
from srm.mm2.records import Checkpoint
from srm.spark.submit import spark_submit_command, submit_environment


def checkpoints(target: Cluster, topic: str, group: str) -> dict[int, int]:
    """Downstream offset per partition of ``group``'s latest checkpoints in ``topic``."""
    if topic not in partition_counts(clients.admin_client(target), include_internal=True):
        return {}
    consumer = clients.reader(target, f"bench-cp-{uuid.uuid4().hex[:6]}")
    found: dict[int, int] = {}
    try:
        for message in read_to_end(consumer, topic, 0, 60):
            if message.value() is not None:
                c = Checkpoint.from_message(message)
                if c.group == group:
                    found[c.partition] = c.downstream_offset
    finally:
        consumer.close()
    return found


def first_source_offset(target: Cluster, remote: str, partition: int, offset: int) -> int | None:
    """The source offset carried by the first record at or after ``offset`` of the remote partition."""
    consumer = clients.reader(target, f"bench-read-{uuid.uuid4().hex[:6]}")
    records = read_to_end(consumer, remote, partition, 20, start=offset)
    try:
        first = next(records, None)
        return None if first is None else int(first.value())
    finally:
        records.close()
        consumer.close()


def score(target: Cluster, remote: str, committed: dict[int, int], downstream: dict[int, int]) -> dict[str, Any]:
    rows = []
    for p, upstream in sorted(committed.items()):
        if p not in downstream:
            rows.append({"partition": p, "committed": upstream, "checkpoint": None})
            continue
        resumed = first_source_offset(target, remote, p, downstream[p])
        resumed = upstream if resumed is None else resumed  # at the end: nothing re-read or skipped
        rows.append(
            {
                "partition": p,
                "committed": upstream,
                "checkpoint": downstream[p],
                "re_read": max(0, upstream - resumed),
                "skipped": max(0, resumed - upstream),
            }
        )
    return {
        "re_read": sum(r.get("re_read", 0) for r in rows),
        "skipped": sum(r.get("skipped", 0) for r in rows),
        "partitions_without_checkpoint": sum(1 for r in rows if r["checkpoint"] is None),
        "per_partition": rows,
    }


def run_mm2(source: Cluster, target: Cluster, topic: str, group: str, partitions: int) -> dict[int, int]:
    alias = f"fs{uuid.uuid4().hex[:6]}"
    servers = {alias: source.bootstrap_servers or "", f"ft{alias}": target.bootstrap_servers or ""}
    with tempfile.TemporaryDirectory() as tmp:
        props = Path(tmp) / "mm2.properties"
        extra = ["emit.checkpoints.interval.seconds = 1", "refresh.groups.interval.seconds = 1", f"groups = {group}"]
        props.write_text(mm2_properties(servers, topic, partitions) + "\n".join(extra) + "\n")
        log = (Path(tmp) / "mm2.log").open("w")
        command = kafka_command("org.apache.kafka.connect.mirror.MirrorMaker", str(props), heap="1g")
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 300
            found: dict[int, int] = {}
            while time.monotonic() < deadline:
                found = checkpoints(target, f"{alias}.checkpoints.internal", group)
                if len(found) == partitions:
                    time.sleep(3)  # let the last syncs turn into checkpoints
                    found = checkpoints(target, f"{alias}.checkpoints.internal", group)
                    break
                time.sleep(1)
        finally:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(60)
    run_mm2.remote = f"{alias}.{topic}"  # type: ignore[attr-defined]
    return found


def run_ours(config_path: Path, target: Cluster, topic: str, group: str) -> tuple[str, dict[int, int]]:
    with tempfile.TemporaryDirectory() as tmp:
        path, src, tgt = flow_config(config_path, Path(tmp), topic, True, 2)
        for job, extra in (("replicate.py", ["--mode", "available-now"]), ("checkpoints.py", [])):
            command = spark_submit_command(job, ["--source", src, "--target", tgt, "--config", str(path), *extra])
            subprocess.run(command, env=submit_environment(), check=True, capture_output=True)
    return f"{src}.{topic}", checkpoints(target, f"{src}.checkpoints.internal", group)


def run(config_path: Path, per_partition: int, partitions: int) -> dict[str, Any]:
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    topic, group = f"bench-fo-{uuid.uuid4().hex[:8]}", f"bench-fo-group-{uuid.uuid4().hex[:6]}"
    ensure_topic(clients.admin_client(source), topic, partitions)
    fill_partitions(source, [(topic, p) for p in range(partitions)], per_partition, value=lambda i: str(i).encode())
    committed = {p: (p * 1237 + 37) % per_partition for p in range(partitions)}
    consumer = clients.consumer(source, group)
    from confluent_kafka import TopicPartition

    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in committed.items()], asynchronous=False)
    consumer.close()
    mm2_found = run_mm2(source, target, topic, group, partitions)
    ours_remote, ours_found = run_ours(config_path, target, topic, group)
    return {
        "per_partition": per_partition,
        "partitions": partitions,
        "committed": committed,
        "mirrormaker2": score(target, run_mm2.remote, committed, mm2_found),  # type: ignore[attr-defined]
        "ours": score(target, ours_remote, committed, ours_found),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--per-partition", type=int, default=10_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    result = run(Path(args.config), args.per_partition, args.partitions)
    print(json.dumps({k: v for k, v in result.items() if k != "committed"}, indent=2))


if __name__ == "__main__":
    main()
