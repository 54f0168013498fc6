"""What a commit costs, in the copier's shapes and in Kafka's textbook one, on the first flow's target.

    .venv/bin/python -m bench.experiments.commit_steps [--transactions 400] [--partitions 8] [--records 25]

A transaction shaped like the copier's under a steady load: records to a topic's partitions, the
flush (their acknowledgements), then a history record and a progress record, then the commit; two
transactional producers take turns, as a slot's do. ``late``: the history and progress partitions
join the transaction only after the flush, as every commit did before ``TargetWriter._open_history``.
``opener``: a record to the history's partition goes with the transaction's first records, and the
progress before the flush, as an available-now copier does. ``journaled``: the opener without the
progress, as most transactions of a continuous copier are (it journals a partition's progress every
PROGRESS_EVERY_S, srm.replication.journal). ``textbook``: Kafka's consume-transform-produce
(``bench.textbook_copier``): the records, the consumer's offsets sent to the transaction, the commit
(its flush inside). The shapes alternate, so all meet the same state of the machine. Prints per
shape its steps and the whole transaction as p50/p90/p99 in ms, as JSON; the topics are deleted
after. Not part of ``make bench``: the report links its figures in the lab notes.
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import TopicPartition

from bench.common import percentile
from bench.latency import clusters, delete_topics
from srm.config.model import Cluster
from srm.kafka import clients
from srm.kafka.topics import ensure_topic

SHAPES = ("late", "opener", "journaled", "textbook")


def transaction(
    producer: Any, shape: str, topics: dict[str, str], partitions: int, records: int, *, group: Any
) -> dict[str, float]:
    """One transaction: its steps and the whole of it, in ms. ``group``: the consumer group's
    metadata the textbook shape sends its offsets with."""
    started = time.perf_counter()
    producer.begin_transaction()
    if shape in ("opener", "journaled"):
        producer.produce(topics["history"], b"", partition=0)
    for i in range(records):
        producer.produce(topics["data"], b"v" * 100, partition=i % partitions)
    if shape == "textbook":
        offsets = [TopicPartition(topics["data"], p, records) for p in range(min(records, partitions))]
        producer.send_offsets_to_transaction(offsets, group, 30)
        sent = time.perf_counter()
        producer.commit_transaction(30)
        ended = time.perf_counter()
        return {"offsets": ms(started, sent), "commit": ms(sent, ended), "total": ms(started, ended)}
    if shape == "opener":
        producer.produce(topics["progress"], b"p", partition=0)
    producer.flush(30)
    flushed = time.perf_counter()
    producer.produce(topics["history"], b"h" * 50, partition=0)
    if shape == "late":
        producer.produce(topics["progress"], b"p", partition=0)
    producer.commit_transaction(30)
    ended = time.perf_counter()
    return {"flush": ms(started, flushed), "after_flush": ms(flushed, ended), "total": ms(started, ended)}


def ms(start: float, end: float) -> float:
    return (end - start) * 1000


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
    consumer = clients.consumer(target, f"bench-steps-{tag}")
    group = consumer.consumer_group_metadata()
    steps: dict[str, dict[str, list[float]]] = {shape: {} for shape in SHAPES}
    try:
        for i in range(transactions * len(SHAPES)):
            shape = SHAPES[i // 2 % len(SHAPES)]  # the producers take turns; each shape meets both
            took = transaction(producers[i % 2], shape, topics, partitions, records, group=group)
            for step, value in took.items():
                steps[shape].setdefault(step, []).append(value)
            time.sleep(0.005)  # the copier polls between commits
        for producer in producers:
            producer.flush(10)
    finally:
        consumer.close()
        delete_topics(target, list(topics.values()))
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
