"""How much exact sync history a continuous flow writes: bytes and runs per partition per hour.

    .venv/bin/python -m bench.history_size [--rates 1000,5000,50000] [--seconds 60] [--partitions 8]

For each rate, ours copies ``bench.latency``'s steady load (100 B records, warm-up first) in
continuous mode with its defaults, on the local clusters (``make kafka-up``); then its history
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

from bench import latency
from srm.config.model import Cluster
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


def measure(config_path: Path, rate: int, seconds: int, partitions: int, workdir: Path) -> dict[str, Any]:
    source, target = latency.clusters(config_path)
    load = latency.Load(rate, seconds, partitions)
    figures = latency.run_with(latency.start_ours(config_path, workdir), source, target, load)
    history = f"srm-offset-syncs.{figures['alias']}.internal"
    found = history_figures(target, history)
    latency.delete_topics(target, [history, f"srm-offsets.{figures['alias']}.internal"])
    hours = (load.seconds + load.warmup_seconds) / 3600
    per = partitions * hours
    return {
        "rate": rate,
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
    args = parser.parse_args()
    import tempfile

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for rate in latency.numbers(args.rates):
            rows.append(measure(Path(args.config), rate, args.seconds, args.partitions, Path(tmp)))
    command = "python -m bench.history_size " + shlex.join(sys.argv[1:])
    print(json.dumps({"command": command.strip(), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
