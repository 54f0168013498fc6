"""What several benchmarks share: percentiles, the load Kafka's own producer makes, records written
into partitions."""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Iterable, Sequence

from confluent_kafka import KafkaException

from srm.config.model import Cluster
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.partitions import await_served
from srm.kafka.topics import partition_counts

FILL_TIMEOUT_S = 120.0


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q <= 100) of ``values``: a value measured, never
    one interpolated between two."""
    if not values:
        raise ValueError("no values to take a percentile of")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def producer_performance_args(bootstrap: str, topic: str, records: int, size: int) -> list[str]:
    """Kafka's ProducerPerformance as fast as it goes: ``records`` of ``size`` bytes into ``topic``,
    acks=all, batches as MirrorMaker 2's producers make them."""
    return [
        *("--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1"),
        *("--bootstrap-server", bootstrap, "--command-property", "acks=all", "linger.ms=10", "batch.size=262144"),
    ]


def fill_partitions(
    source: Cluster,
    keys: list[tuple[str, int]],
    records: int,
    size: int = 100,
    value: Callable[[int], bytes] | None = None,
) -> None:
    """``records`` records of ``size`` bytes into each of ``keys`` (topic, partition), a partition's
    records together (batches of many), once the leaders of the just-created partitions hold them.
    ``value``: the value of a partition's i-th record, instead of ``size`` bytes."""
    producer = clients.producer(source, **{"linger.ms": 20})
    await_served(clients.admin_client(source), keys, FILL_TIMEOUT_S)  # the leaders hold them: no produce refused
    fixed = b"s" * size
    for topic, partition in keys:
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, fixed if value is None else value(i), partition=partition)
                    break
                except BufferError:  # its queue is full (100,000 records): let acknowledgements drain it
                    producer.poll(0.1)
        producer.poll(0)
    if producer.flush(FILL_TIMEOUT_S):
        topics = len({t for t, _ in keys})
        raise RuntimeError(f"records to {topics} topics not acknowledged within {FILL_TIMEOUT_S:.0f} s")


def run_topics(names: Iterable[str], token: str) -> list[str]:
    """The topics among ``names`` of the run of ``token``: one of the name's dot-separated parts is
    one of the run's cluster aliases (letters, then the token: ``bs<token>``, ``tm<token>``) or the
    token itself. A name holding the token elsewhere (``orders-<token>``) is someone else's."""
    alias = re.compile(rf"[a-z]*{re.escape(token)}")
    return [name for name in names if any(alias.fullmatch(part) for part in name.split("."))]


def drop_run_topics(source: Cluster, target: Cluster, topic: str | None, token: str) -> None:
    """Delete a run's topic on ``source`` (if named) and every topic of the run (:func:`run_topics`:
    its remote topic, heartbeats and the replicator's internal topics) on both clusters: records x
    size on each cluster per run, and hundreds of small topics a full run."""
    from bench.latency import delete_topics  # it imports bench.available_now, which imports this

    for cluster, own in ((source, [topic] if topic else []), (target, [])):
        try:
            listed = partition_counts(clients.admin_client(cluster), include_internal=True)
        except (SrmError, KafkaException) as exc:  # the run's figures stand; its other topics stay
            print(f"bench: the topics of {cluster.alias} not listed, those of run {token} left: {exc}", file=sys.stderr)
            listed = {}
        delete_topics(cluster, [*own, *run_topics(listed, token)])
