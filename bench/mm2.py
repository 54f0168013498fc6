"""Apache Kafka's MirrorMaker 2 on the local clusters, the yardstick of the throughput benchmark.

    .venv/bin/python -m bench.mm2 --records 1000000 --size 1024 --partitions 8

Fills a fresh topic on the first flow's source with Kafka's ProducerPerformance, starts MM2 in
dedicated mode (``org.apache.kafka.connect.mirror.MirrorMaker``, the resolved connect-mirror jars)
with its default settings, ``tasks.max`` = partitions up to MAX_TASKS and only that topic, and
times from MM2's start until the target's remote topic holds every record (or ``timeout_s``:
then the copy figures are None). Prints the figures as JSON: wall time
(MM2's start-up included) and the copy time from the first record on the target to the last,
records/s and MB/s, CPU seconds and peak memory of the MM2 process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from bench.available_now import fill, workload_parser
from bench.common import drop_run_topics
from bench.usage import Usage
from bench.watch import POLL_S, TargetWatch
from srm.config import load_config
from srm.devenv.jvm import kafka_command
from srm.kafka import clients
from srm.kafka.topics import ensure_topic

# MM2's tasks: one per partition up to 8 (as bench.scale's topics runs). 2,048 tasks, each with its
# own consumer and producer, on this 2-core machine did not copy 200,000 records in 15 minutes.
MAX_TASKS = 8
STOP_S = 60.0


def mm2_properties(servers: dict[str, str], topic: str, tasks: int) -> str:
    """MM2's defaults, except what a single-broker cluster needs (replication factors of 1)."""
    source, target = servers
    return "\n".join(
        [
            f"clusters = {source}, {target}",
            f"{source}.bootstrap.servers = {servers[source]}",
            f"{target}.bootstrap.servers = {servers[target]}",
            f"{source}->{target}.enabled = true",
            f"{source}->{target}.topics = {topic}",
            f"{target}->{source}.enabled = false",
            f"tasks.max = {tasks}",
            "replication.factor = 1",
            *(
                f"{name}.replication.factor = 1"
                for name in ("checkpoints.topic", "heartbeats.topic", "offset-syncs.topic")
            ),
            *(f"{name}.storage.replication.factor = 1" for name in ("offset", "status", "config")),
            "",
        ]
    )


def run(base: Path, records: int, size: int, partitions: int, timeout_s: float = 900) -> dict[str, Any]:
    config = load_config(base)
    flow = config.enabled_flows()[0]
    source_cluster, target_cluster = config.cluster(flow.source), config.cluster(flow.target)
    topic = f"bench-mm2-{uuid.uuid4().hex[:8]}"
    ensure_topic(clients.admin_client(source_cluster), topic, partitions)
    fill_s = fill(source_cluster, topic, partitions, records, size)
    token = uuid.uuid4().hex[:6]
    source, target = f"ms{token}", f"mt{token}"  # fresh aliases: fresh MM2 internal topics
    remote = f"{source}.{topic}"
    with tempfile.TemporaryDirectory() as tmp:
        props = Path(tmp) / "mm2.properties"
        props.write_text(
            mm2_properties(
                {source: source_cluster.bootstrap_servers or "", target: target_cluster.bootstrap_servers or ""},
                topic,
                min(partitions, MAX_TASKS),
            )
        )
        command = kafka_command("org.apache.kafka.connect.mirror.MirrorMaker", str(props), heap="1g")
        log = Path(tmp) / "mm2.log"
        with log.open("w") as out:
            watch = TargetWatch(target_cluster, {remote: partitions}, records)
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
            usage = Usage(process)
            try:
                while watch.done is None and time.monotonic() - watch.started < timeout_s:
                    if process.poll() is not None:
                        raise SystemExit(f"MM2 exited, copied {watch.seen} of {records}:\n{log.read_text()[-3000:]}")
                    time.sleep(POLL_S)
            finally:
                watch.stop()
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(STOP_S)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait(STOP_S)
                used = usage.finish()
    wall = (watch.done or time.monotonic()) - watch.started
    drop_run_topics(source_cluster, target_cluster, topic, token)
    return {
        "tool": "mirrormaker2",
        "records": records,
        "record_size": size,
        "partitions": partitions,
        "tasks_max": min(partitions, MAX_TASKS),
        "copied_all": watch.done is not None,
        "fill_seconds": round(fill_s, 2),
        "job_seconds": round(wall, 2),
        "job_records_per_s": round(records / wall),
        **watch.figures(records, size),
        **used,
    }


def main() -> None:
    args = workload_parser(__doc__).parse_args()
    print(json.dumps(run(Path(args.config), args.records, args.size, args.partitions), indent=2))


if __name__ == "__main__":
    main()
