"""What a commit costs once its records are acknowledged, with and without an opener.

    .venv/bin/python -m bench.experiments.commit_steps [--transactions 400] [--partitions 8] [--records 25]

A transaction shaped like the copier's under a steady load, on the first flow's target: records to
a topic's partitions, the flush (their acknowledgements), then a history record and a progress
record, then the commit; two transactional producers take turns, as a slot's do. ``late``: the
history and progress partitions join the transaction only after the flush, as every commit did
before ``TargetWriter._open_history``. ``opener``: a record to the history's partition goes with
the transaction's first records, and the progress before the flush, as the copier does now. The
two shapes alternate, so both meet the same state of the machine. Prints per shape the flush and
the step after it (history, progress, EndTxn) as p50/p90/p99 in ms, as JSON. Not part of
``make bench``: the report links its figures in the lab notes.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from bench.common import percentile
from bench.latency import clusters
from srm.config.model import Cluster
from srm.kafka import clients
from srm.kafka.topics import ensure_topic

SHAPES = ("late", "opener")


def transaction(
    producer: Any, shape: str, topics: dict[str, str], partitions: int, records: int
) -> tuple[float, float]:
    """One transaction; (flush, after the flush) in ms."""
    started = time.perf_counter()
    producer.begin_transaction()
    if shape == "opener":
        producer.produce(topics["history"], b"", partition=0)
    for i in range(records):
        producer.produce(topics["data"], b"v" * 100, partition=i % partitions)
    if shape == "opener":
        producer.produce(topics["progress"], b"p", partition=0)
    producer.flush(30)
    flushed = time.perf_counter()
    producer.produce(topics["history"], b"h" * 50, partition=0)
    if shape == "late":
        producer.produce(topics["progress"], b"p", partition=0)
    producer.commit_transaction(30)
    return (flushed - started) * 1000, (time.perf_counter() - flushed) * 1000


def quantiles(values: list[float]) -> dict[str, float]:
    return {f"p{q}": round(percentile(values, q), 2) for q in (50, 90, 99)}


def measure(target: Cluster, transactions: int, partitions: int, records: int) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:8]
    topics = {
        "data": f"bench-steps-{tag}",
        "history": f"bench-steps-history-{tag}",
        "progress": f"bench-steps-progress-{tag}",
    }
    admin = clients.admin_client(target)
    for name, topic in topics.items():
        ensure_topic(admin, topic, partitions if name == "data" else 1)
    producers = []
    for turn in range(2):
        producer = clients.producer(target, **{"transactional.id": f"bench-steps-{tag}-{turn}", "linger.ms": 5})
        producer.init_transactions(30)
        producers.append(producer)
    steps: dict[str, dict[str, list[float]]] = {shape: {"flush": [], "after_flush": []} for shape in SHAPES}
    for i in range(transactions * len(SHAPES)):
        shape = SHAPES[i // 2 % len(SHAPES)]  # the producers take turns; each shape meets both
        flush, after = transaction(producers[i % 2], shape, topics, partitions, records)
        steps[shape]["flush"].append(flush)
        steps[shape]["after_flush"].append(after)
        time.sleep(0.005)  # the copier polls between commits
    for producer in producers:
        producer.flush(10)
    return {shape: {step: quantiles(values) for step, values in by_step.items()} for shape, by_step in steps.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=Path("conf/srm.yaml"))
    parser.add_argument("--transactions", type=int, default=400, help="per shape")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--records", type=int, default=25, help="per transaction")
    args = parser.parse_args()
    _, target = clusters(args.config)
    print(json.dumps(measure(target, args.transactions, args.partitions, args.records), indent=2))


if __name__ == "__main__":
    main()
