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
from bench.scale import median_run
from tests.conftest import free_ports
from tests.spark_cluster import StandaloneCluster


def measure(
    config: Path,
    records: int,
    size: int,
    partitions: int | list[int],
    *,
    tasks: int,
    workers: list[int],
    repeat: int = 1,
) -> dict[str, Any]:
    counts = partitions if isinstance(partitions, list) else [partitions]
    return {
        "rows": [
            row
            for count in counts
            for row in by_master(config, records, size, count, tasks=tasks, workers=workers, repeat=repeat)
        ]
    }


def by_master(
    config: Path, records: int, size: int, partitions: int, *, tasks: int, workers: list[int], repeat: int = 1
) -> list[Any]:
    """The copy on local[*, 4], then on each cluster of ``workers`` workers, ``repeat`` times in
    turn; each master's row is its run of the median job rate (every run under ``runs``), with its
    rates against local's."""
    runs: dict[int, list[dict[str, Any]]] = {0: [], **{count: [] for count in workers}}
    for _ in range(repeat):
        runs[0].append(run(config, records, size, partitions, exactly_once=True, tasks=tasks))
        for count in workers:
            row = on_cluster(config, records, size, partitions, tasks=tasks, workers=count)
            runs[count].append({**row, "workers": count})
    rows = [median_job(each) for each in runs.values()]
    local = rows[0]
    for row in rows:
        row["vs_local"] = round(row["job_records_per_s"] / local["job_records_per_s"], 2)
        copying, local_copying = row["copy_records_per_s"], local["copy_records_per_s"]
        row["copying_vs_local"] = round(copying / local_copying, 2) if copying and local_copying else None
    return rows


def on_cluster(config: Path, records: int, size: int, partitions: int, *, tasks: int, workers: int) -> dict[str, Any]:
    """One copy on a standalone cluster of ``workers`` workers of 2 cores, started for it."""
    with tempfile.TemporaryDirectory() as tmp:
        cluster = StandaloneCluster(Path(tmp), free_ports(2 + workers), workers=workers, cores=2, memory="2g")
        try:
            cluster.start()
            row = run(config, records, size, partitions, exactly_once=True, tasks=tasks, master=cluster.master)
        finally:
            cluster.stop()
    return {**row, "cores": 2 * workers}


def median_job(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The run of the median job rate, its figures together (its first record, not the median of
    every run's), with every run under ``runs`` when there are several."""
    return median_run(runs, by="job_records_per_s", medians=())


def main() -> None:
    parser = workload_parser(__doc__ or "", records=4_000_000, size=1024, partitions=[64, 512])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--workers", default="1,2", help="comma-separated worker counts")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each master, in turn; the median's is shown")
    args = parser.parse_args()
    workers = [int(w) for w in args.workers.split(",")]
    print(
        json.dumps(
            measure(
                Path(args.config),
                args.records,
                args.size,
                args.partitions,
                tasks=args.tasks,
                workers=workers,
                repeat=args.repeat,
            ),
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
