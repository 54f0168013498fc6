"""How much exact sync history a continuous flow writes: bytes and runs per partition per hour.

    .venv/bin/python -m bench.history_size [--rates 1000,5000,50000] [--seconds 60] [--partitions 8]
        [--linger-ms 0,100]

For each rate and each ``transaction.linger.ms``, ours copies ``bench.latency``'s steady load (100 B
records, warm-up first) in continuous mode with its defaults otherwise (``transaction.interval.ms``
twice the linger when the linger is 100 ms or more), on the local clusters (``make kafka-up``); then its history
topic (``srm-offset-syncs.<alias>.internal`` on the target) is read whole: its records (a history
record per partition a transaction moved, plus one opener per transaction), their bytes (key and
value) and the runs they hold, per partition and per hour of the measured load. Every transaction
ends a run on each partition it touched (its commit marker takes a target offset), so the runs per
hour follow the transactions, not the records: what the prune (srm.offsets.retention) then keeps is
these figures times the source's retention. The run's topics are deleted afterwards.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from bench import latency, replicators
from bench.common import drop_run_topics
from srm.config.model import Cluster
from srm.config.settings import FlowSettings
from srm.errors import RecordFormatError
from srm.kafka import clients
from srm.kafka.partitions import read_to_end
from srm.mm2.records import OffsetRunsRecord, is_opener


def history_figures(target: Cluster, topic: str) -> dict[str, int]:
    """Records, bytes and runs of the history topic (committed records only)."""
    consumer = clients.reader(target, "bench-history-size")
    figures = {"records": 0, "openers": 0, "bytes": 0, "runs": 0}
    try:
        for message in read_to_end(consumer, topic, 0):
            figures["records"] += 1
            figures["bytes"] += len(message.key() or b"") + len(message.value() or b"")
            if is_opener(message):
                figures["openers"] += 1
                continue
            try:
                figures["runs"] += max(1, len(OffsetRunsRecord.from_message(message).runs))
            except RecordFormatError:
                continue
    finally:
        consumer.close()
    return figures


def flow_settings(linger_ms: int) -> dict[str, int]:
    """The flow's transaction settings at ``linger_ms`` (the interval must stay above the linger)."""
    if not linger_ms:
        return {}
    interval = FlowSettings().transaction_interval_ms
    return {"transaction.linger.ms": linger_ms, "transaction.interval.ms": max(interval, 2 * linger_ms)}


def measure(
    config_path: Path, rate: int, seconds: int, partitions: int, workdir: Path, *, linger_ms: int = 0
) -> dict[str, Any]:
    source, target = latency.clusters(config_path)
    load = latency.Load(rate, seconds, partitions)
    settings = flow_settings(linger_ms)

    def start(topic: str) -> tuple[Any, str]:
        return replicators.ours(config_path, workdir, topic, settings=settings)

    figures = latency.run_with(start, source, target, load, keep_internal=True)
    history = f"srm-offset-syncs.{figures['alias']}.internal"
    token = replicators.run_token(figures["alias"])
    try:
        found = history_figures(target, history)
    finally:
        if token is not None:  # ours' alias: always
            drop_run_topics(source, target, None, token)
    hours = (load.seconds + load.warmup_seconds) / 3600
    per = partitions * hours
    return {
        "rate": rate,
        "linger_ms": linger_ms,
        "partitions": partitions,
        "seconds": load.seconds + load.warmup_seconds,
        "p99_ms": figures["p99_ms"],
        **found,
        "bytes_per_partition_hour": round(found["bytes"] / per),
        "runs_per_partition_hour": round(found["runs"] / per),
        "transactions_per_s": round(found["openers"] / (hours * 3600), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--rates", default="1000,5000,50000")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--linger-ms", default="0", help="transaction.linger.ms values, comma-separated")
    args = parser.parse_args()
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for linger in latency.numbers(args.linger_ms):
            for rate in latency.numbers(args.rates):
                rows.append(
                    measure(Path(args.config), rate, args.seconds, args.partitions, Path(tmp), linger_ms=linger)
                )
    command = "python -m bench.history_size " + shlex.join(sys.argv[1:])
    print(json.dumps({"command": command.strip(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
