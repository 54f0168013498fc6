"""What exactly-once costs in latency on these brokers: ours, Kafka's textbook pattern and MirrorMaker 2.

    .venv/bin/python -m bench.eos_floor [--rounds 3] [--rate 5000] [--seconds 30] [--partitions 8]

Each round runs ``bench.latency``'s load (warm-up included) three times on the local clusters
(``make kafka-up``): ours (exactly once, its defaults), ``bench.textbook_copier`` (Kafka's own
consume-transform-produce in transactions, with nothing of ours: no Spark, no history, no
progress, no ownership), and MirrorMaker 2 (at least once, its defaults). The rounds alternate the
tools so each meets the same state of the machine. Prints JSON: each run's p50/p95/p99/max and the
records read against those sent, and per tool the median of the rounds. The textbook copier's
figures are the floor a copier built on Kafka transactions (as librdkafka speaks them) meets here;
MirrorMaker 2 waits for no commit. Not part of ``make bench``: the report quotes it
(bench/report.py, TAIL).
"""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench import latency, replicators

FIGURES = ("p50_ms", "p95_ms", "p99_ms", "max_ms")
COUNTS = ("records", "sent")


def tools(config_path: Path, workdir: Path, partitions: int) -> dict[str, latency.Start]:
    return {
        "ours_exactly_once": latency.start_ours(config_path, workdir),
        "textbook_exactly_once": lambda topic: replicators.textbook(config_path, workdir, topic, partitions),
        "mirrormaker2": latency.start_mirrormaker2(config_path, workdir, partitions),
    }


def measure(config_path: Path, load: latency.Load, rounds: int) -> dict[str, Any]:
    source, target = latency.clusters(config_path)
    runs: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            for name, start in tools(config_path, Path(tmp), load.partitions).items():
                figures = latency.run_with(start, source, target, load)
                kept = {k: round(figures[k], 1) for k in FIGURES} | {k: figures[k] for k in COUNTS}
                runs.setdefault(name, []).append(kept)
    return dict(load.described()) | {
        "rounds": rounds,
        "median": {name: {k: statistics.median(r[k] for r in rs) for k in FIGURES} for name, rs in runs.items()},
        "runs": runs,
    }


def main() -> None:
    parser = latency.load_arguments(__doc__.split("\n")[0], seconds=30)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tool, alternated (default %(default)s)")
    args = parser.parse_args()
    load = latency.Load(args.rate, args.seconds, args.partitions, args.warmup_seconds)
    print(json.dumps(measure(Path(args.config), load, args.rounds), indent=2))


if __name__ == "__main__":
    main()
