"""Time and peak memory of one checkpoint pass for many groups over many partitions, on the local clusters.

    .venv/bin/python -m bench.checkpoints_scale --groups 1000 --partitions 10000 --topics 100 \\
        [--per-group 100] [--records 100] [--config conf/srm.yaml]

Creates ``--topics`` topics holding ``--partitions`` partitions in all (``--records`` records of
100 bytes each), replicates them (available-now), commits offsets for ``--groups`` groups, each on
``--per-group`` partitions drawn at random (0: on every partition) with AdminClient
alter_consumer_group_offsets, then runs ``spark-submit spark/checkpoints.py`` once: the job's wall
time, the pass's own time from its log line, and the peak memory of the job's process tree
(bench.usage: RSS and PSS sums). The topics are deleted at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench import latency
from bench.available_now import flow_config
from bench.common import fill_partitions
from bench.soak.job import PASS_LINE, pass_cpu, pass_steps
from bench.usage import Usage
from srm.config import load_config
from srm.config.model import Cluster
from srm.kafka import clients
from srm.kafka.partitions import list_offsets
from srm.kafka.topics import NewTopicSpec, ensure_topics
from srm.offsets.groups import alter_group_offsets, describe_groups
from srm.spark.submit import spark_submit_command, submit_environment

Key = tuple[str, int]


def submit(script: str, args: list[str]) -> tuple[float, str, dict[str, Any]]:
    """Run a job to its end: (wall seconds, its output, its CPU and peak memory)."""
    started = time.monotonic()
    process = subprocess.Popen(
        spark_submit_command(script, args),
        env=submit_environment(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    usage = Usage(process)
    output, _ = process.communicate()
    used = usage.finish()
    if process.returncode != 0:
        raise SystemExit(f"{script} failed:\n{output[-3000:]}")
    return time.monotonic() - started, output, used


def fill(source: Cluster, topics: list[str], partitions: int, records: int) -> list[Key]:
    """``topics`` with ``partitions`` partitions in all, each holding ``records`` records of 100 B."""
    per_topic, extra = divmod(partitions, len(topics))
    sizes = {name: per_topic + (1 if i < extra else 0) for i, name in enumerate(topics)}
    ensure_topics(clients.admin_client(source), [NewTopicSpec(name, n) for name, n in sizes.items() if n])
    keys = [(name, p) for name, n in sizes.items() for p in range(n)]
    fill_partitions(source, keys, records)
    return keys


def delete_groups(admin: Any, names: list[str]) -> None:
    """The benchmark's consumer groups, gone from the source (those never committed are skipped)."""
    from confluent_kafka import KafkaException

    if not names:
        return
    for future in admin.delete_consumer_groups(names, request_timeout=60).values():
        with contextlib.suppress(KafkaException):  # GROUP_ID_NOT_FOUND: filling failed before it
            future.result()


def run(base: Path, groups: int, partitions: int, *, topics: int, per_group: int, records: int) -> dict[str, Any]:
    config = load_config(base)
    flow = config.enabled_flows()[0]
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    prefix = f"cpscale-{uuid.uuid4().hex[:8]}-"
    names = [f"{prefix}{i:04d}" for i in range(topics)]
    admin = clients.admin_client(source)
    rng = random.Random(1)
    group_names = [f"cpscale-group-{i:04d}-{prefix}" for i in range(groups)]
    with tempfile.TemporaryDirectory() as tmp:
        path, src, tgt = flow_config(base, Path(tmp), f"{prefix}.*", True, 2)
        args = ["--source", src, "--target", tgt, "--config", str(path)]
        try:
            keys = fill(source, names, partitions, records)
            ends = list_offsets(admin, keys, "latest")
            replicate_s, _, _ = submit("replicate.py", [*args, "--mode", "available-now"])
            started = time.monotonic()
            for name in group_names:
                chosen = keys if per_group <= 0 or per_group >= len(keys) else rng.sample(keys, per_group)
                refused = alter_group_offsets(admin, name, {key: rng.randint(0, ends[key]) for key in chosen})
                if refused:
                    raise SystemExit(f"cannot commit offsets for {name}: {refused}")
            commit_s = time.monotonic() - started
            describe_groups(admin, group_names)
            wall, output, used = submit("checkpoints.py", args)
        finally:
            delete_groups(admin, group_names)
            latency.delete_topics(source, names)
            latency.delete_topics(target, [f"{src}.{name}" for name in names])
    found = list(PASS_LINE.finditer(output))
    if not found:
        raise SystemExit(f"no pass summary in the output:\n{output[-3000:]}")
    seen, written, _unchanged, pass_s = found[-1].groups()[:4]
    positions = groups * (len(keys) if per_group <= 0 else min(per_group, len(keys)))
    return {
        "groups": groups,
        "partitions": len(keys),
        "topics": topics,
        "per_group": per_group,
        "records": records,
        "group_offsets": positions,
        "groups_seen": int(seen),
        "checkpoints_written": int(written),
        "pass_seconds": float(pass_s),
        "pass_steps": pass_steps(found[-1]),
        "pass_cpu_seconds": pass_cpu(found[-1]),
        "job_seconds": round(wall, 1),
        "job_peak_pss_mb": used["peak_pss_mb"],
        "job_peak_rss_mb": used["peak_rss_mb"],
        "job_cpu_seconds": used["cpu_seconds"],
        "replicate_seconds": round(replicate_s, 1),
        "commit_seconds": round(commit_s, 1),
    }


def measure(config: Path, *, groups: int, partitions: int, topics: int, per_group: int, records: int) -> dict[str, Any]:
    """bench.run's part: :func:`run` with the preset's options."""
    return run(config, groups, partitions, topics=topics, per_group=per_group, records=records)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--groups", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--per-group", type=int, default=100, help="partitions each group commits on (0: all)")
    parser.add_argument("--records", type=int, default=100, help="records per partition")
    args = parser.parse_args()
    found = run(
        Path(args.config),
        args.groups,
        args.partitions,
        topics=args.topics,
        per_group=args.per_group,
        records=args.records,
    )
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
