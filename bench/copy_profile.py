"""Where a copy task's time goes: PySpark's own Python worker profiler around our copy job.

    .venv/bin/python -m bench.copy_profile [--records 300000] [--size 100] [--partitions 8]

Runs the available-now benchmark (bench.available_now) with ``spark.python.profile`` on, which
wraps every Python task in cProfile and dumps the statistics when the driver exits; the copy
tasks' statistics are merged and summed up: time inside confluent-kafka's C calls (librdkafka:
consume, produce, poll, transactions), time waiting on the source admin client, and time in our
own Python code, plus the functions with the most time of their own. cProfile slows Python code
down (each Python call is traced), so the Python share is an upper bound; the shares, not the
profiled records/s, are the finding.
"""

from __future__ import annotations

import json
import pstats
import tempfile
from pathlib import Path
from typing import Any

from bench import available_now

TOP = 15
# PySpark's profiler keeps only file names: ours are the modules of the srm package.
OURS = {path.name for path in (Path(__file__).resolve().parents[1] / "srm").rglob("*.py")} - {"__init__.py"}


def where(function: tuple[str, int, str]) -> str:
    path, line, name = function
    if path == "~":  # a builtin: cProfile names it "{method 'produce' of 'cimpl.Producer' objects}"
        return name
    return f"{Path(path).name}:{line}({name})"


def category(function: tuple[str, int, str]) -> str:
    path, _, name = function
    if path == "~" and "cimpl." in name:
        return "confluent-kafka C calls (librdkafka)"
    if path == "~" and "_thread.lock" in name:
        return "waiting on a future (admin requests)"
    if Path(path).name in OURS:
        return "our Python code (srm)"
    return "other Python (PySpark worker, stdlib)"


def summarize(stats: pstats.Stats) -> dict[str, Any]:
    table: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in table.values())  # tottime: each second counted once
    shares: dict[str, float] = {}
    for function, row in table.items():
        shares[category(function)] = shares.get(category(function), 0.0) + row[2]
    top = sorted(table.items(), key=lambda item: item[1][2], reverse=True)[:TOP]
    return {
        "profiled_seconds": round(total, 2),
        "shares": {name: round(seconds / total, 3) for name, seconds in sorted(shares.items(), key=lambda x: -x[1])},
        "top": [
            {"function": where(f), "calls": row[1], "own_s": round(row[2], 3), "cumulative_s": round(row[3], 3)}
            for f, row in top
        ],
    }


def measure(config_path: Path, records: int, size: int, partitions: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        figures = available_now.run(
            config_path,
            records,
            size,
            partitions,
            exactly_once=True,
            tasks=2,
            spark_conf={"spark.python.profile": "true", "spark.python.profile.dump": tmp},
        )
        dumps = sorted(Path(tmp).glob("*.pstats"))
        if not dumps:
            raise SystemExit(f"spark.python.profile wrote nothing into {tmp}")
        # Every Python RDD of the job is profiled; the copy tasks are the ones running run_slot.
        copy = [d for d in dumps if any(f[2] == "run_slot" for f in pstats.Stats(str(d)).stats)]  # type: ignore[attr-defined]
        stats = pstats.Stats(*(str(d) for d in copy or dumps))
    return {
        "records": records,
        "record_size": size,
        "partitions": partitions,
        "profiled_copy_records_per_s": figures["copy_records_per_s"],
        **summarize(stats),
    }


def main() -> None:
    args = available_now.workload_parser(__doc__, records=300_000, size=100).parse_args()
    print(json.dumps(measure(Path(args.config), args.records, args.size, args.partitions), indent=2))


if __name__ == "__main__":
    main()
