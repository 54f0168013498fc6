"""Throughput of one flow on a Spark standalone cluster next to ``local[*]`` on the same machine.

    python -m bench.cluster --records 4000000 --size 1024 --partitions 64,512 --tasks 4

For each partition count: the available-now copy of one topic (bench.available_now) on
``local[*, 4]``, then on a standalone master with 1, then 2 workers (tests/spark_cluster.py:
Spark's own ``spark-class``, workers that cannot see the checkout); prints one JSON. On one
machine the cluster adds executor JVMs, the application's registration and the shipping of the
archive, and shares the same cores: it measures what running distributed costs (a start-up paid
once per job, then the copy's rate), not a speed-up.
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
    config: Path, records: int, size: int, partitions: int | list[int], *, tasks: int, workers: list[int]
) -> dict[str, Any]:
    counts = partitions if isinstance(partitions, list) else [partitions]
    return {
        "rows": [
            row for count in counts for row in by_master(config, records, size, count, tasks=tasks, workers=workers)
        ]
    }


def by_master(config: Path, records: int, size: int, partitions: int, *, tasks: int, workers: list[int]) -> list[Any]:
    """The copy on local[*, 4], then on each cluster of ``workers`` workers; each row with its
    rates against local's."""
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
    local = rows[0]
    for row in rows:
        row["vs_local"] = round(row["job_records_per_s"] / local["job_records_per_s"], 2)
        copying, local_copying = row["copy_records_per_s"], local["copy_records_per_s"]
        row["copying_vs_local"] = round(copying / local_copying, 2) if copying and local_copying else None
    return rows


def main() -> None:
    parser = workload_parser(__doc__ or "", records=4_000_000, size=1024, partitions=[64, 512])
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
