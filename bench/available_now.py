"""Throughput of one flow in available-now mode on the local clusters.

    .venv/bin/python -m bench.available_now --records 1000000 --size 1024 --partitions 8 \\
        --exactly-once on --tasks 2 [--config conf/srm.yaml]

Fills a fresh topic on the first flow's source with Kafka's own ProducerPerformance, then times
``spark-submit spark/replicate.py --mode available-now`` for a flow that admits only that topic
(fresh cluster aliases, so nothing else is copied and no earlier progress applies). Prints and
returns the figures: the job's wall time (Spark start included), the copy batch's own time from
its log line, and the copy time from the first record visible on the target to the last (the
figure MirrorMaker 2 is measured by too, bench.watch), with records/s and MB/s.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from bench.common import FILL_TIMEOUT_S, drop_run_topics, producer_performance_args
from bench.usage import Usage
from bench.watch import POLL_S, TargetWatch, visible_records
from srm.config import load_config
from srm.config.model import Cluster
from srm.devenv.jvm import kafka_command
from srm.kafka import clients
from srm.kafka.partitions import await_served
from srm.kafka.topics import ensure_topic
from srm.spark.submit import spark_submit_command, submit_environment

BATCH_LINE = re.compile(r"batch \d+: (\d+) record\(s\), ([\d.]+) MiB from \d+ of \d+ partition\(s\) in ([\d.]+) s")
PHASES = re.compile(r"batch \d+: .* records/s; ([^)]*)\)")


def fill(source: Cluster, topic: str, partitions: int, records: int, size: int) -> float:
    """Produce ``records`` of ``size`` bytes into the just-created ``topic`` with Kafka's
    ProducerPerformance, once the leaders of its partitions serve them; returns seconds.

    ProducerPerformance counts a record it could not deliver and goes on (at 2,048 partitions
    just created, 253 of 200,000 were refused with UNKNOWN_TOPIC_OR_PART), and a copy then waits
    for records that never were: the source must hold them all, or the run stops saying so."""
    admin = clients.admin_client(source)
    keys = [(topic, p) for p in range(partitions)]
    await_served(admin, keys, FILL_TIMEOUT_S)
    started = time.monotonic()
    command = kafka_command(
        "org.apache.kafka.tools.ProducerPerformance",
        *producer_performance_args(source.bootstrap_servers or "", topic, records, size),
        heap="512m",
    )
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    seconds = time.monotonic() - started
    held = visible_records(admin, {topic: partitions}, present=keys)
    if held != records:
        raise SystemExit(
            f"{source.alias}: {topic} holds {held:,} of the {records:,} records ProducerPerformance was to write:\n"
            f"{(done.stdout + done.stderr)[-2000:]}"
        )
    return seconds


def flow_config(
    base: Path, tmp: Path, topic: str, exactly_once: bool, tasks: int, **settings: Any
) -> tuple[Path, str, str]:
    """A config with the first flow's clusters under fresh aliases and one flow for ``topic``
    (``settings``: more flow settings, by their YAML names)."""
    config = load_config(base)
    flow = config.enabled_flows()[0]
    token = uuid.uuid4().hex[:6]
    source, target = f"bs{token}", f"bt{token}"
    data = {
        "defaults": {"replication.factor": 1, "offset-syncs.topic.replication.factor": 1},
        "clusters": {
            source: {"bootstrap.servers": config.cluster(flow.source).bootstrap_servers},
            target: {"bootstrap.servers": config.cluster(flow.target).bootstrap_servers},
        },
        "flows": [
            {
                "source": source,
                "target": target,
                "topics": [topic],
                "exactly_once": exactly_once,
                "tasks.max": tasks,
                **settings,
            }
        ],
        "storage": {"warehouse": str(tmp / "warehouse"), "plan_logs": str(tmp / "plan-logs")},
    }
    path = tmp / "bench.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path, source, target


def run(
    base: Path,
    records: int,
    size: int,
    partitions: int,
    *,
    exactly_once: bool,
    tasks: int,
    spark_conf: dict[str, str] | None = None,
    master: str | None = None,
) -> dict[str, Any]:
    config = load_config(base)
    flow = config.enabled_flows()[0]
    source_cluster = config.cluster(flow.source)
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    token = topic  # until the flow's aliases exist: "bs" and "bt" + a token its remote and internal topics hold
    process: subprocess.Popen[str] | None = None
    try:
        ensure_topic(clients.admin_client(source_cluster), topic, partitions)
        fill_s = fill(source_cluster, topic, partitions, records, size)
        with tempfile.TemporaryDirectory() as tmp:
            path, source, target = flow_config(base, Path(tmp), topic, exactly_once, tasks)
            token = source.removeprefix("bs")
            command = spark_submit_command(
                "replicate.py",
                ["--source", source, "--target", target, "--mode", "available-now", "--config", str(path)],
                master,
                conf=spark_conf,
                files=() if master is None else (str(path),),
            )
            started = time.monotonic()
            watch = TargetWatch(config.cluster(flow.target), {f"{source}.{topic}": partitions}, records)
            try:
                process = subprocess.Popen(
                    command, env=submit_environment(master), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
                )
                usage = Usage(process)
                output, _ = process.communicate()
                wall = time.monotonic() - started
                used = usage.finish()
                time.sleep(2 * POLL_S)  # the watch's last poll
            finally:
                watch.stop()
                if process is not None and process.poll() is None:  # interrupted: the job goes too
                    process.kill()
                    process.wait()
    finally:  # a run's topics hold records x size on each cluster: the disk fills without this
        drop_run_topics(source_cluster, config.cluster(flow.target), topic, token)
    if process.returncode != 0:
        raise SystemExit(f"replication failed:\n{output[-3000:]}")
    # spark-submit merges the Python driver's stderr into the JVM's stdout.
    batches = [(int(n), float(mib), float(s)) for n, mib, s in BATCH_LINE.findall(output)]
    copied = sum(b[0] for b in batches)
    mib = sum(b[1] for b in batches)
    batch_s = sum(b[2] for b in batches)
    return {
        "master": master or "local[*, 4]",
        "records": records,
        "record_size": size,
        "partitions": partitions,
        "exactly_once": exactly_once,
        "tasks_max": tasks,
        "copied": copied,
        "fill_seconds": round(fill_s, 2),
        "job_seconds": round(wall, 2),
        "batch_seconds": round(batch_s, 2),
        "job_records_per_s": round(copied / wall),
        "job_mb_per_s": round(mib * 1.048576 / wall, 1),
        "batch_records_per_s": round(copied / batch_s) if batch_s else None,
        "batch_mb_per_s": round(mib * 1.048576 / batch_s, 1) if batch_s else None,
        "batch_phases": PHASES.findall(output),
        **watch.figures(records, size),
        **used,
    }


def workload_parser(
    doc: str, *, records: int = 1_000_000, size: int = 1024, partitions: list[int] | None = None
) -> argparse.ArgumentParser:
    """The options every one-topic benchmark takes: the config and the topic's records, their
    size and its partitions (8; with ``partitions``, comma-separated counts, those by default)."""
    parser = argparse.ArgumentParser(description=doc.split("\n", maxsplit=1)[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--records", type=int, default=records)
    parser.add_argument("--size", type=int, default=size)
    if partitions is None:
        parser.add_argument("--partitions", type=int, default=8)
    else:
        parser.add_argument("--partitions", type=lambda text: [int(p) for p in text.split(",")], default=partitions)
    return parser


def main() -> None:
    parser = workload_parser(__doc__)
    parser.add_argument("--exactly-once", choices=("on", "off"), default="on")
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--master", help="Spark master (default local[*, 4])")
    args = parser.parse_args()
    figures = run(
        Path(args.config),
        args.records,
        args.size,
        args.partitions,
        exactly_once=args.exactly_once == "on",
        tasks=args.tasks,
        master=args.master,
    )
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
