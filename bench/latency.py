"""End-to-end latency under a steady producer: ours (continuous mode) and MirrorMaker 2.

    .venv/bin/python -m bench.latency [--rate 5000] [--seconds 60] [--warmup-seconds 5] [--partitions 8]
    .venv/bin/python -m bench.latency --rate 5000 --sweep 25,100,1000   # ours per transaction.interval.ms
    .venv/bin/python -m bench.latency --rates 5000,50000 --sweep 25,100  # both: what bench.run reports

For each tool: a fresh topic on the first flow's source, the replicator started and warmed up
(one record through each partition, written by the load's producer and read by the consumer that
then measures, so neither the start of any of the replicator's tasks nor the clients' counts), then
that producer writes ``--rate`` records/s of 100 B for ``--warmup-seconds`` and then ``--seconds``
more while that consumer, read_committed, reads the remote topic; a record's latency is the time it
arrives on the target minus its CreateTime (one clock; both replicators keep CreateTime), and only
the records created after the warm-up count. The warm-up keeps the first fraction of a second of a
load on a fresh topic out of the figures: a consumer of the *source* topic, in this process, sees
its records 60-160 ms late there (docs/benchmarks/lab-notes.md), before either replicator could touch them,
and those ~1,000 records were most of both tools' slowest 1%. Prints p50/p95/p99/max per tool as
JSON (``bench.run`` puts them in the report).
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from array import array
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from bench import replicators
from bench.common import drop_run_topics, percentile
from srm.config import load_config
from srm.config.model import Cluster
from srm.config.settings import FlowSettings
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.retry import retrying
from srm.kafka.topics import ensure_topic, partition_counts

WARMUP_TIMEOUT_S = 120.0
RECORD_SIZE = 100  # bytes of each record's value
DELETE_REQUEST_S = 20.0  # one DeleteTopics request's timeout, the controller's lookup included
DELETE_FOR_S = 120.0  # attempts at deleting a run's topics before leaving them


def produce_steadily(producer: Any, topic: str, rate: int, seconds: float, stop: threading.Event) -> int:
    sent, started = 0, time.monotonic()
    while not stop.is_set() and time.monotonic() - started < seconds:
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            producer.produce(topic, value=b"x" * RECORD_SIZE)
            sent += 1
        producer.poll(0)
        time.sleep(0.002)
    producer.flush(30)
    return sent


class Reader:
    """A read_committed consumer of every partition of ``remote``, stamping records as they arrive."""

    def __init__(self, target: Cluster, remote: str, timeout_s: float) -> None:
        from confluent_kafka import TopicPartition

        deadline = time.monotonic() + timeout_s
        while remote not in partition_counts(clients.admin_client(target)) and time.monotonic() < deadline:
            time.sleep(0.2)
        partitions = partition_counts(clients.admin_client(target)).get(remote, 0)
        self.consumer = clients.consumer(target, f"bench-latency-{uuid.uuid4().hex[:6]}")
        self.consumer.assign([TopicPartition(remote, p, 0) for p in range(partitions)])

    def read(self, expected: Callable[[], int | None], timeout_s: float) -> list[tuple[int, float]]:
        """(CreateTime, latency in ms) of every record read until ``expected()`` (None: not known
        yet) arrived or time ran out."""
        deadline = time.monotonic() + timeout_s
        # Two flat arrays, not a list of tuples: Python's full garbage collections visit every item
        # of a list, and one of 1.5 million arrivals (50,000 records/s) took them to 20-45 ms, a
        # stall of this process that held back the load's producer (a burst of ~2,000 records
        # after it) and this reader alike (bench/REPORT.md, "Latency").
        created_ms, latency_ms = array("q"), array("d")
        while time.monotonic() < deadline:
            total = expected()
            if total is not None and len(created_ms) >= total:
                break
            # poll() returns as soon as a record is there; consume(n, 0) then takes what else is
            # (consume(n, t) would hold records back until n arrived or t passed).
            first = self.consumer.poll(0.1)
            if first is None:
                continue
            arrived_ms = time.time() * 1000
            for message in [first, *self.consumer.consume(10_000, 0)]:
                if message.error() is None:
                    created = message.timestamp()[1]
                    created_ms.append(created)
                    latency_ms.append(arrived_ms - created)
        return list(zip(created_ms, latency_ms, strict=True))

    def close(self) -> None:
        self.consumer.close()


def percentiles(values: list[float]) -> dict[str, float]:
    def at(q: float) -> float:
        return round(percentile(values, q), 1)

    return {"records": len(values), "p50_ms": at(50), "p95_ms": at(95), "p99_ms": at(99), "max_ms": max(values)}


@dataclass(frozen=True)
class Load:
    rate: int  # records/s
    seconds: int  # measured
    partitions: int
    warmup_seconds: int = 5  # of the same load before, not measured

    def described(self) -> dict[str, int]:
        """The load as the figures name it."""
        return {
            "rate": self.rate,
            "seconds": self.seconds,
            "warmup_seconds": self.warmup_seconds,
            "partitions": self.partitions,
            "record_size": RECORD_SIZE,
        }


Start = Callable[[str], tuple[subprocess.Popen[bytes], str]]


def run_with(
    start: Start,
    source: Cluster,
    target: Cluster,
    load: Load,
    during: Callable[[], AbstractContextManager[Any]] = nullcontext,
    *,
    keep_internal: bool = False,
) -> dict[str, Any]:
    """Start a replicator for a fresh topic, warm it up with a record per partition, then measure
    a steady load (``during()``: a context that holds while the load is produced, e.g. bench.broker_load's).
    The run's topics are deleted after it; ``keep_internal``: not the replicator's internal ones,
    which the caller reads and deletes (bench.common.drop_run_topics)."""
    topic = f"bench-lat-{uuid.uuid4().hex[:8]}"
    ensure_topic(clients.admin_client(source), topic, load.partitions)
    process, alias = start(topic)
    try:
        # The load's own producer writes the warm-up records: its connection and metadata are ready
        # before the measured records, whose CreateTime would otherwise include the producer's start.
        producer = clients.producer(source, **{"linger.ms": 5})
        for partition in range(load.partitions):  # every partition: each task of either tool has started
            producer.produce(topic, value=b"warm", partition=partition)
        producer.flush(10)
        reader = Reader(target, f"{alias}.{topic}", WARMUP_TIMEOUT_S)
        try:
            warm = len(reader.read(lambda: load.partitions, WARMUP_TIMEOUT_S))
            if warm < load.partitions:
                raise SystemExit(
                    f"the replicator copied {warm} of {load.partitions} warm-up records within {WARMUP_TIMEOUT_S:.0f} s"
                )
            stop = threading.Event()
            results: dict[str, int] = {}
            failed: list[BaseException] = []

            def feed() -> None:
                try:
                    warmup = produce_steadily(producer, topic, load.rate, load.warmup_seconds, stop)
                    time.sleep(0.002)  # every warm-up record's CreateTime (ms) is before the next ms
                    results["measured_from_ms"] = int(time.time() * 1000)
                    with during():
                        results["sent"] = produce_steadily(producer, topic, load.rate, load.seconds, stop)
                    results["total"] = warmup + results["sent"]
                except BaseException as exc:  # raised again below, in the benchmark's thread
                    failed.append(exc)

            feeder = threading.Thread(target=feed)
            # What this process made so far (imports, clients) leaves the collector's view: a full
            # collection during the load walks only what the load itself makes.
            gc.collect()
            gc.freeze()
            feeder.start()
            arrivals = reader.read(lambda: results.get("total"), load.warmup_seconds + load.seconds + 60)
            stop.set()
            feeder.join()
            if failed:
                raise failed[0]
        finally:
            reader.close()
    finally:
        replicators.stop(process)
        drop_topics(source, target, topic, alias, internal=not keep_internal)
    measured_from = results["measured_from_ms"]
    latencies = [latency for created, latency in arrivals if created >= measured_from]
    return percentiles(latencies) | {"sent": results.get("sent", 0), "alias": alias}


LEASE_LINE = re.compile(r"lease \d+: .* in ([\d.]+) s \(.*\), (\d+) transaction\(s\)")


def commits_per_second(log: Path) -> float | None:
    """Transactions per second per partition over the leases ``replicate.py`` logged."""
    leases = [LEASE_LINE.search(line) for line in log.read_text(errors="replace").splitlines()]
    seconds = sum(float(m[1]) for m in leases if m)
    return round(sum(int(m[2]) for m in leases if m) / seconds, 1) if seconds else None


def clusters(config_path: Path) -> tuple[Cluster, Cluster]:
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    return config.cluster(flow.source), config.cluster(flow.target)


def drop_topics(source: Cluster, target: Cluster, topic: str, alias: str, *, internal: bool = True) -> None:
    """Delete a run's load topic and its copy: ~185 MB on each cluster per run at 50,000 records/s
    for 30 s, which filled this machine's disk after a few hundred runs of the benchmarks and the
    experiments around them (the brokers stopped on a full disk); ``internal``: and the topics the
    replicator made for the run (history, progress, status, heartbeats; MM2's configs, offsets,
    status, offset syncs, checkpoints), 8 a run, 209 MB on the target after 44 runs of ours at
    50,000 records/s (bench.common.drop_run_topics)."""
    token = replicators.run_token(alias)
    if internal and token is not None:
        drop_run_topics(source, target, topic, token)
        return
    delete_topics(source, [topic])
    delete_topics(target, [f"{alias}.{topic}"])


def delete_topics(cluster: Cluster, names: list[str]) -> None:
    """Delete the benchmark's ``names`` on ``cluster``. One that cannot be deleted (e.g. no DELETE
    permission on a shared cluster, or the cluster not answering for DELETE_FOR_S) is said so and
    left; the figures of its run stand.

    Each attempt takes a new admin client: right after a single-broker cluster resumes from a
    freeze, its controller fences and unfences the broker, and a client that looked the controller
    up in between kept waiting for it until its request timed out (bench.monitoring, 3 deletes of 8)."""
    pending = list(names)
    if not pending:
        return

    def attempt() -> None:
        admin = clients.admin_client(cluster)  # held until every future is done: its end fails them
        futures = admin.delete_topics(pending, operation_timeout=DELETE_REQUEST_S, request_timeout=DELETE_REQUEST_S)
        timed_out = None
        for name, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args[0].code() in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT):
                    timed_out = exc
                    continue
                # UNKNOWN_TOPIC_OR_PART: never made (its run failed early) or deleted by an earlier attempt
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    print(f"bench: topic {name!r} left on {cluster.alias}: {exc}", file=sys.stderr, flush=True)
            pending.remove(name)
        if timed_out is not None:
            raise timed_out

    try:
        retrying(attempt, f"deleting {len(pending)} topic(s)", DELETE_FOR_S, cluster=cluster.alias)
    except SrmError as exc:
        print(f"bench: topics {pending} left on {cluster.alias}: {exc}", file=sys.stderr, flush=True)


def start_ours(config_path: Path, workdir: Path, interval_ms: int | None = None) -> Start:
    """How ours is started: exactly once, at ``interval_ms`` (None: the default transaction.interval.ms)."""
    settings = {} if interval_ms is None else {"transaction.interval.ms": interval_ms}
    return lambda topic: replicators.ours(config_path, workdir, topic, settings=settings)


def start_mirrormaker2(config_path: Path, workdir: Path, partitions: int) -> Start:
    """How MirrorMaker 2 is started: its defaults, a task per partition."""
    source, target = clusters(config_path)
    return lambda topic: replicators.mirrormaker2(source, target, workdir, topic, tasks=partitions)


def ours(config_path: Path, workdir: Path, load: Load, interval_ms: int | None) -> dict[str, Any]:
    """Ours, exactly once, at ``interval_ms`` (None: the default transaction.interval.ms)."""
    source, target = clusters(config_path)
    figures = run_with(start_ours(config_path, workdir, interval_ms), source, target, load)
    return figures | {"commits_per_s": commits_per_second(workdir / f"ours-{figures['alias']}.log")}


def run(
    config_path: Path,
    *,
    rate: int,
    seconds: int,
    partitions: int,
    warmup_seconds: int = Load.warmup_seconds,
    interval_ms: int | None = None,
) -> dict[str, Any]:
    """Ours (exactly once; ``interval_ms``: its transaction.interval.ms, else the default) and MM2."""
    load = Load(rate, seconds, partitions, warmup_seconds)
    source, target = clusters(config_path)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        return load.described() | {
            "transaction_interval_ms": interval_ms or FlowSettings().transaction_interval_ms,
            "ours_exactly_once": ours(config_path, workdir, load, interval_ms),
            "mirrormaker2": run_with(start_mirrormaker2(config_path, workdir, partitions), source, target, load),
        }


def sweep(
    config_path: Path,
    *,
    rate: int,
    seconds: int,
    partitions: int,
    intervals: list[int],
    warmup_seconds: int = Load.warmup_seconds,
    measured: dict[int, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Ours only, once per transaction.interval.ms; ``measured``: runs at the same load already
    made, by interval, taken as they are instead of measured again."""
    load = Load(rate, seconds, partitions, warmup_seconds)
    measured = measured or {}
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            {"transaction_interval_ms": interval}
            | (measured.get(interval) or ours(config_path, Path(tmp), load, interval))
            for interval in intervals
        ]
    return load.described() | {"sweep": rows}


def measure(
    config_path: Path,
    *,
    rates: list[int],
    seconds: int,
    partitions: int,
    sweep_ms: list[int],
    warmup_seconds: int = Load.warmup_seconds,
) -> dict[str, Any]:
    """Both tools at every rate (ours at its default transaction.interval.ms), then ours alone
    at the first rate once per ``sweep_ms`` value."""
    shape = {"seconds": seconds, "partitions": partitions, "warmup_seconds": warmup_seconds}
    runs = [run(config_path, rate=rate, **shape) for rate in rates]
    figures: dict[str, Any] = {"runs": runs}
    if sweep_ms:
        first = runs[0]
        figures["sweep"] = sweep(
            config_path,
            rate=rates[0],
            intervals=sweep_ms,
            **shape,
            measured={first["transaction_interval_ms"]: first["ours_exactly_once"]},
        )
    return figures


def numbers(text: str) -> list[int]:
    return [int(v) for v in text.split(",") if v]


def load_arguments(description: str, seconds: int) -> argparse.ArgumentParser:
    """The options every latency-load benchmark takes: the config, and the load's rate, length,
    warm-up and partitions."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--rate", type=int, default=5000)
    parser.add_argument("--seconds", type=int, default=seconds, help="how long the load is measured")
    parser.add_argument(
        "--warmup-seconds",
        type=int,
        default=Load.warmup_seconds,
        help="how long the same load runs first, not measured (default %(default)s)",
    )
    parser.add_argument("--partitions", type=int, default=8)
    return parser


def main() -> None:
    parser = load_arguments(__doc__.split("\n")[0], seconds=60)
    parser.add_argument(
        "--transaction-interval-ms", type=int, help="ours: transaction.interval.ms (default: the flow default)"
    )
    parser.add_argument("--sweep", type=numbers, help="comma-separated transaction.interval.ms values: ours only")
    parser.add_argument("--rates", type=numbers, help="comma-separated rates: both tools at each, then --sweep")
    args = parser.parse_args()
    common = {"seconds": args.seconds, "partitions": args.partitions, "warmup_seconds": args.warmup_seconds}
    if args.rates:
        if args.transaction_interval_ms is not None:
            parser.error("--rates measures ours at its default transaction.interval.ms; use --sweep for others")
        figures = measure(Path(args.config), rates=args.rates, sweep_ms=args.sweep or [], **common)
    elif args.sweep:
        figures = sweep(Path(args.config), rate=args.rate, intervals=args.sweep, **common)
    else:
        figures = run(Path(args.config), rate=args.rate, interval_ms=args.transaction_interval_ms, **common)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
