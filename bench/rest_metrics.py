"""Response time of the REST API's metric endpoints over a large warehouse.

    python -m bench.rest_metrics --topics 100 --days 30 --requests 50

Writes ``--days`` of one-minute metrics rows for ``--topics`` topics of one flow (100 x 30 days =
4.32 M rows, ending now) into a fresh warehouse, as one Delta append per day, then does what the
flow's maintenance DAG does (its ``metrics_rollup`` task): the hourly rollup of every settled hour,
then OPTIMIZE and VACUUM of the metrics tables, each timed. Then times the endpoints in-process
(FastAPI's TestClient: routing, the Delta scans, sampling, JSON), ``--requests`` times each, a
different topic each time. Prints one JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from srm.config import load_config
from srm.config.model import Flow
from srm.maintenance.compaction import maintain
from srm.maintenance.metrics_rollup import roll_up
from srm.storage.warehouse import METRICS, METRICS_HOURLY, Warehouse

FLOW = ("bench-west", "bench-east")
MINUTE_MS = 60_000


def write_metrics(warehouse: Warehouse, topics: int, days: int, end_ms: int) -> int:
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    from srm.storage.warehouse import _schemas

    schema = _schemas()[METRICS]
    minutes = 24 * 60
    rng = np.random.default_rng(7)
    for day in range(days):
        start = end_ms - (days - day) * minutes * MINUTE_MS
        times = np.repeat(start + np.arange(minutes, dtype=np.int64) * MINUTE_MS, topics)
        topic_index = np.tile(np.arange(topics), minutes)
        count = len(times)
        records = rng.integers(1_000, 60_000, count)
        columns: dict[str, Any] = {field.name: pa.nulls(count, field.type) for field in schema}
        names = np.array([f"topic-{i:03d}" for i in range(topics)], dtype=object)
        columns.update(
            flow=pa.array(np.full(count, f"{FLOW[0]}->{FLOW[1]}", dtype=object)),
            topic=pa.array(names[topic_index]),
            target_topic=pa.array(np.char.add(f"{FLOW[0]}.", names[topic_index].astype(str))),
            partition=pa.array(np.zeros(count, dtype=np.int32)),
            records=pa.array(records),
            bytes=pa.array(records * 1024),
            lag=pa.array(rng.integers(0, 500, count)),
            latency_avg_ms=pa.array(rng.uniform(20, 200, count)),
            record_age_avg_ms=pa.array(rng.uniform(10, 150, count)),
            started_at=pa.array(times - 1_000, pa.timestamp("ms", tz="UTC")),
            finished_at=pa.array(times, pa.timestamp("ms", tz="UTC")),
        )
        table = pa.table([columns[f.name].cast(f.type) for f in schema], schema=schema)
        write_deltalake(warehouse.path(METRICS), table, mode="append")
    return days * minutes * topics


def config_file(folder: Path) -> Path:
    data = {
        "clusters": {
            alias: {"bootstrap.servers": f"127.0.0.1:{port}"} for alias, port in zip(FLOW, (1, 2), strict=True)
        },
        "flows": [{"source": FLOW[0], "target": FLOW[1]}],
        "storage": {"warehouse": str(folder / "warehouse"), "plan_logs": str(folder / "plan-logs")},
    }
    path = folder / "srm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def maintenance(warehouse: Warehouse, flow: Flow) -> dict[str, Any]:
    """The maintenance DAG's metrics_rollup task on the fresh warehouse, timed step by step."""
    began = time.monotonic()
    rolled = roll_up(warehouse, flow)[0]
    rolled_at = time.monotonic()
    upkeep = {u.table: u for u in maintain(warehouse)}
    done = time.monotonic()
    return {
        "rollup_seconds": round(rolled_at - began, 1),
        "rolled_hours": rolled.hours,
        "hourly_rows": rolled.rows_written,
        "optimize_vacuum_seconds": round(done - rolled_at, 1),
        "files": {t: [u.files_before, u.files_after] for t, u in upkeep.items() if t in (METRICS, METRICS_HOURLY)},
    }


def time_requests(client: Any, paths: list[str]) -> dict[str, Any]:
    took = []
    for path in paths:
        began = time.perf_counter()
        response = client.get(path)
        took.append((time.perf_counter() - began) * 1000)
        body = response.json()
        assert response.status_code == 200 and (body.get("series") or body.get("topics")), (path, response.text[:300])
    took.sort()
    return {
        "requests": len(took),
        "p50_ms": round(statistics.median(took), 1),
        "p95_ms": round(took[min(len(took) - 1, int(len(took) * 0.95))], 1),
        "max_ms": round(took[-1], 1),
    }


def measure(topics: int, days: int, requests: int) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from srm.service.app import create_app

    with tempfile.TemporaryDirectory() as tmp:
        path = config_file(Path(tmp))
        config = load_config(path)
        began = time.monotonic()
        warehouse = Warehouse(config.storage.warehouse)
        rows = write_metrics(warehouse, topics, days, int(time.time() * 1000))
        written_s = round(time.monotonic() - began, 1)
        upkeep = maintenance(warehouse, config.enabled_flows()[0])
        app = create_app(
            path, user=lambda: "bench", groups_reader=lambda: None, paused=lambda ids: {}, flow_access=lambda *_: True
        )
        client = TestClient(app)
        source, target = FLOW
        pick = [f"topic-{i % topics:03d}" for i in range(requests)]
        cases = {
            "cluster-metrics, last hour": [f"/v2/cluster-metrics/{source}/{target}/record-rate?hours=1"] * requests,
            "cluster-metrics, last 24 h": [f"/v2/cluster-metrics/{source}/{target}/byte-rate?hours=24"] * requests,
            "topic-metrics (upstream), last hour": [
                f"/v2/topic-metrics/{source}/{target}/{t}/replication-latency-ms?hours=1" for t in pick
            ],
            "topic-metrics (downstream), last hour": [
                f"/v2/topic-metrics/{target}/{source}.{t}/replication-records-lag?hours=1" for t in pick
            ],
            "topic-metrics (upstream), last 7 days": [
                f"/v2/topic-metrics/{source}/{target}/{t}/record-rate?hours=168&samples=168" for t in pick
            ],
            "replication topics (the page's table), last 24 h": [f"/v2/replications/{source}/{target}/topics?hours=24"]
            * requests,
            "replication topics (the page's table), last 7 days": [
                f"/v2/replications/{source}/{target}/topics?hours=168"
            ]
            * requests,
            f"topic-metrics (upstream), all {days} days": [
                f"/v2/topic-metrics/{source}/{target}/{t}/record-age-ms?hours={24 * days}&samples=120" for t in pick
            ],
        }
        results = [{"endpoint": name, **time_requests(client, paths)} for name, paths in cases.items()]
    return {
        "rows_in_warehouse": rows,
        "topics": topics,
        "days": days,
        "write_seconds": written_s,
        **upkeep,
        "endpoints": results,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(measure(args.topics, args.days, args.requests), indent=2))


if __name__ == "__main__":
    main()
