"""End-to-end latency under a steady producer: ours (continuous mode) and MirrorMaker 2.

    .venv/bin/python -m bench.latency [--rate 5000] [--seconds 60] [--partitions 8]

For each tool: a fresh topic on the first flow's source, the replicator started and warmed up,
then a producer writes ``--rate`` records/s for ``--seconds`` while a consumer on the target reads
the remote topic; a record's latency is the time it is read on the target minus its CreateTime
(both on this machine's clock; the replicators keep CreateTime). Prints p50/p95/p99/max per tool
as JSON (``bench.run`` puts them in the report).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import replicators
from srm import clients
from srm.config import load_config
from srm.config.model import Cluster
from srm.topics import ensure_topic, partition_counts

WARMUP_TIMEOUT_S = 120.0


def produce_steadily(cluster: Cluster, topic: str, rate: int, seconds: float, stop: threading.Event) -> int:
    producer = clients.producer(cluster, **{"linger.ms": 5})
    sent, started = 0, time.monotonic()
    while not stop.is_set() and time.monotonic() - started < seconds:
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            producer.produce(topic, value=b"x" * 100)
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(30)
    return sent


def measure(target: Cluster, remote: str, expected: int, timeout_s: float) -> list[float]:
    """Latency (ms) of every record read from ``remote`` until ``expected`` arrived or time ran out."""
    from confluent_kafka import TopicPartition

    consumer = clients.consumer(target, f"bench-latency-{uuid.uuid4().hex[:6]}")
    deadline = time.monotonic() + timeout_s
    while remote not in partition_counts(clients.admin_client(target)) and time.monotonic() < deadline:
        time.sleep(0.2)
    partitions = partition_counts(clients.admin_client(target)).get(remote, 0)
    consumer.assign([TopicPartition(remote, p, 0) for p in range(partitions)])
    latencies: list[float] = []
    try:
        while len(latencies) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.1):
                if message.error() is None:
                    latencies.append(time.time() * 1000 - message.timestamp()[1])
    finally:
        consumer.close()
    return latencies


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)

    return {"records": len(ordered), "p50_ms": at(0.5), "p95_ms": at(0.95), "p99_ms": at(0.99), "max_ms": ordered[-1]}


@dataclass(frozen=True)
class Load:
    rate: int  # records/s
    seconds: int
    partitions: int


def run_with(
    start: Callable[[str], tuple[subprocess.Popen[bytes], str]], source: Cluster, target: Cluster, load: Load
) -> dict[str, Any]:
    """Start a replicator for a fresh topic, warm it up with one record, then measure a steady load."""
    topic = f"bench-lat-{uuid.uuid4().hex[:8]}"
    ensure_topic(clients.admin_client(source), topic, load.partitions)
    process, alias = start(topic)
    remote = f"{alias}.{topic}"
    try:
        producer = clients.producer(source)
        producer.produce(topic, value=b"warm", partition=0)
        producer.flush(10)
        if not measure(target, remote, 1, WARMUP_TIMEOUT_S):
            raise SystemExit(f"the replicator copied nothing within {WARMUP_TIMEOUT_S:.0f} s")
        stop = threading.Event()
        results: dict[str, int] = {}
        feeder = threading.Thread(
            target=lambda: results.update(sent=produce_steadily(source, topic, load.rate, load.seconds, stop))
        )
        feeder.start()
        latencies = measure(target, remote, load.rate * load.seconds + 1, load.seconds + 60)
        stop.set()
        feeder.join()
    finally:
        replicators.stop(process)
    return percentiles(latencies[1:]) | {"sent": results.get("sent", 0)}


def run(config_path: Path, *, rate: int, seconds: int, partitions: int) -> dict[str, Any]:
    load = Load(rate, seconds, partitions)
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        return {
            "rate": rate,
            "seconds": seconds,
            "partitions": partitions,
            "record_size": 100,
            "ours_exactly_once": run_with(
                lambda topic: replicators.ours(config_path, workdir, topic), source, target, load
            ),
            "mirrormaker2": run_with(
                lambda topic: replicators.mirrormaker2(source, target, workdir, topic, tasks=partitions),
                source,
                target,
                load,
            ),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()
    figures = run(Path(args.config), rate=args.rate, seconds=args.seconds, partitions=args.partitions)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
