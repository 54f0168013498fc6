"""Throughput of one flow on a Spark standalone cluster next to ``local[*]`` on the same machine.

    python -m bench.cluster --records 1000000 --size 1024 --partitions 64 --tasks 4

Starts a standalone master and 1, then 2 workers (tests/spark_cluster.py: Spark's own
``spark-class``, workers that cannot see the checkout), runs the available-now copy of one topic
through each (bench.available_now), and the same copy on ``local[*, 4]``; prints one JSON.
On one machine the cluster adds executor JVMs and the shipping of the archive, and shares the same
cores, so it measures the overhead of running distributed, not a speed-up.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from bench.available_now import run, workload_parser
from tests.conftest import free_ports
from tests.spark_cluster import StandaloneCluster


def measure(
    config: Path, records: int, size: int, partitions: int, *, tasks: int, workers: list[int]
) -> dict[str, Any]:
    rows = [run(config, records, size, partitions, exactly_once=True, tasks=tasks)]
    for count in workers:
        with tempfile.TemporaryDirectory() as tmp:
            cluster = StandaloneCluster(Path(tmp), free_ports(2 + count), workers=count, cores=2, memory="2g")
            try:
                cluster.start()
                row = run(config, records, size, partitions, exactly_once=True, tasks=tasks, master=cluster.master)
            finally:
                cluster.stop()
        rows.append({**row, "workers": count, "cores": 2 * count})
    local = rows[0]["job_records_per_s"]
    for row in rows:
        row["vs_local"] = round(row["job_records_per_s"] / local, 2)
    return {"rows": rows}


def main() -> None:
    parser = workload_parser(__doc__ or "", records=1_000_000, size=1024)
    parser.set_defaults(partitions=64)
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    print(
        json.dumps(
            measure(Path(args.config), args.records, args.size, args.partitions, tasks=args.tasks, workers=workers),
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
