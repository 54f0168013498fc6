"""Time of one checkpoint pass for many groups and partitions on the local clusters.

    .venv/bin/python -m bench.checkpoints_scale --groups 1000 --partitions 100 [--config conf/srm.yaml]

Creates a topic with ``--partitions`` partitions (1,000 records of 100 bytes each),
replicates it (available-now), commits offsets for ``--groups`` groups on every partition
(AdminClient alter_consumer_group_offsets), then times ``spark-submit spark/checkpoints.py``:
the job's wall time and the pass's own time from its log line.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.available_now import flow_config
from bench.soak.job import PASS_LINE
from srm import clients
from srm.config import load_config
from srm.offsets.groups import alter_group_offsets, describe_groups
from srm.sparkapp import spark_submit_command, submit_environment
from srm.topics import ensure_topic, list_offsets


def submit(script: str, args: list[str]) -> tuple[float, str]:
    started = time.monotonic()
    result = subprocess.run(
        spark_submit_command(script, args), env=submit_environment(), capture_output=True, text=True, check=False
    )
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise SystemExit(f"{script} failed:\n{output[-3000:]}")
    return time.monotonic() - started, output


def run(base: Path, groups: int, partitions: int) -> dict[str, Any]:
    config = load_config(base)
    source = config.cluster(config.enabled_flows()[0].source)
    topic = f"cpscale-{uuid.uuid4().hex[:8]}"
    admin = clients.admin_client(source)
    ensure_topic(admin, topic, partitions)
    producer = clients.producer(source, **{"linger.ms": 20})
    for i in range(partitions * 1000):  # every partition gets 1,000 records
        producer.produce(topic, b"x" * 100, partition=i % partitions)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)
    ends = list_offsets(admin, [(topic, p) for p in range(partitions)], "latest")
    with tempfile.TemporaryDirectory() as tmp:
        path, src, tgt = flow_config(base, Path(tmp), topic, True, 2)
        args = ["--source", src, "--target", tgt, "--config", str(path)]
        replicate_s, _ = submit("replicate.py", [*args, "--mode", "available-now"])
        rng = random.Random(1)
        names = [f"cpscale-group-{i:04d}-{topic}" for i in range(groups)]
        started = time.monotonic()
        for name in names:
            offsets = {(topic, p): rng.randint(0, ends[(topic, p)]) for p in range(partitions)}
            refused = alter_group_offsets(admin, name, offsets)
            if refused:
                raise SystemExit(f"cannot commit offsets for {name}: {refused}")
        commit_s = time.monotonic() - started
        describe_groups(admin, names)
        wall, output = submit("checkpoints.py", args)
    found = PASS_LINE.findall(output)
    if not found:
        raise SystemExit(f"no pass summary in the output:\n{output[-3000:]}")
    seen, written, _unchanged, pass_s = found[-1]
    return {
        "groups": groups,
        "partitions": partitions,
        "group_offsets": groups * partitions,
        "groups_seen": int(seen),
        "checkpoints_written": int(written),
        "pass_seconds": float(pass_s),
        "job_seconds": round(wall, 1),
        "replicate_seconds": round(replicate_s, 1),
        "commit_seconds": round(commit_s, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    args = parser.parse_args()
    print(json.dumps(run(Path(args.config), args.groups, args.partitions), indent=2))


if __name__ == "__main__":
    main()
