"""Throughput side by side: the brokers' limit, Apache Kafka's MirrorMaker 2, and our replicate job.

    .venv/bin/python -m bench.throughput [--records 1000000] [--sizes 1024,100] [--partitions 8] [--repeat 3]

On the local clusters (``make kafka-up``), per record size and repetition: (a) the limit — Kafka's
ProducerPerformance into the source, ConsumerPerformance out of it, ProducerPerformance into the
target; (b) MirrorMaker 2 with its defaults and ``tasks.max`` = partitions (bench.mm2); (c) our
job in available-now mode with exactly-once on and off (bench.available_now), both timed from
the first record visible on the target to the last (bench.watch). Prints medians with min-max
spread, ours/MM2 and ours/limit (``bench.run`` puts every run in the report and its JSON).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import uuid
from pathlib import Path
from typing import Any

from bench import available_now, latency, mm2
from bench.common import producer_performance_args
from srm.config import load_config
from srm.devenv.jvm import kafka_command
from srm.kafka import clients
from srm.kafka.topics import ensure_topic


def tool_rate(main_class: str, *args: str) -> float:
    """Records/s that Kafka's ProducerPerformance or ConsumerPerformance reports (its JVM start excluded)."""
    result = subprocess.run(kafka_command(main_class, *args, heap="512m"), check=True, capture_output=True, text=True)
    out = result.stdout
    produced = re.findall(r"records sent, ([\d.]+) records/sec", out)
    if produced:
        return float(produced[-1])
    header, values = [line for line in out.splitlines() if "," in line][-2:]
    row = dict(zip((h.strip() for h in header.split(",")), (v.strip() for v in values.split(",")), strict=False))
    return float(row["nMsg.sec"])


def produce_rate(bootstrap: str, topic: str, records: int, size: int) -> float:
    return tool_rate(
        "org.apache.kafka.tools.ProducerPerformance", *producer_performance_args(bootstrap, topic, records, size)
    )


def consume_rate(bootstrap: str, topic: str, records: int) -> float:
    return tool_rate(
        "org.apache.kafka.tools.ConsumerPerformance",
        *("--bootstrap-server", bootstrap, "--topic", topic, "--messages", str(records)),
    )


def limit(config_path: Path, records: int, size: int, partitions: int) -> dict[str, Any]:
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    topic = f"bench-limit-{uuid.uuid4().hex[:8]}"
    for cluster in (source, target):
        ensure_topic(clients.admin_client(cluster), topic, partitions)
    rates = {"produce_source": produce_rate(source.bootstrap_servers or "", topic, records, size)}
    rates["consume_source"] = consume_rate(source.bootstrap_servers or "", topic, records)
    rates["produce_target"] = produce_rate(target.bootstrap_servers or "", topic, records, size)
    return {"records_per_s": {k: round(v) for k, v in rates.items()}, "limit_records_per_s": round(min(rates.values()))}


def drop_bench_topics(config_path: Path) -> None:
    """Delete the benchmark's topics (``bench-*`` and their remote copies) on the flow's clusters."""
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    for alias in (flow.source, flow.target):
        cluster = config.cluster(alias)
        topics = clients.admin_client(cluster).list_topics(timeout=30).topics
        latency.delete_topics(cluster, [t for t in topics if "bench-" in t])


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values)), "min": round(min(values)), "max": round(max(values))}


TOOLS = ("mm2", "eos_on", "eos_off")


def summarize(runs: list[dict[str, Any]], size: int) -> dict[str, Any]:
    """Medians and spreads per tool: copy records/s and MB/s (first to last record on the target),
    whole-job records/s (start-up included), CPU seconds, peak memory; ours/MM2 and ours/limit."""
    mine = [r for r in runs if r["size"] == size]
    out: dict[str, Any] = {"limit": spread([r["limit"]["limit_records_per_s"] for r in mine])}
    for tool in TOOLS:
        out[tool] = {
            key: spread([r[tool][key] for r in mine])
            for key in (
                "copy_records_per_s",
                "copy_mb_per_s",
                "job_records_per_s",
                "cpu_seconds",
                "peak_rss_mb",
                "peak_pss_mb",
            )
        }
    for mode in ("eos_on", "eos_off"):
        rate = out[mode]["copy_records_per_s"]["median"]
        out[f"{mode}_vs_mm2"] = round(rate / out["mm2"]["copy_records_per_s"]["median"], 2)
        out[f"{mode}_vs_limit"] = round(rate / out["limit"]["median"], 2)
    out["mm2_vs_limit"] = round(out["mm2"]["copy_records_per_s"]["median"] / out["limit"]["median"], 2)
    return out


def measure(
    config_path: Path, *, records: int, sizes: list[int], partitions: int, repeat: int, tasks: int
) -> dict[str, Any]:
    runs = []
    for size in sizes:
        for rep in range(repeat):
            run: dict[str, Any] = {"size": size, "repetition": rep}
            print(f"  {size} B, repetition {rep + 1}/{repeat}: limit", flush=True)
            run["limit"] = limit(config_path, records, size, partitions)
            print("  mirrormaker 2", flush=True)
            run["mm2"] = mm2.run(config_path, records, size, partitions)
            for mode, eos in (("eos_on", True), ("eos_off", False)):
                print(f"  ours, {mode}", flush=True)
                run[mode] = available_now.run(config_path, records, size, partitions, exactly_once=eos, tasks=tasks)
            print("  " + json.dumps({t: run[t].get("copy_records_per_s") for t in TOOLS}), flush=True)
            runs.append(run)
            drop_bench_topics(config_path)
    return {
        "records": records,
        "partitions": partitions,
        "repeat": repeat,
        "tasks": tasks,
        "runs": runs,
        "summary": {str(size): summarize(runs, size) for size in sizes},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="1024,100")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=2, help="our tasks.max (the machine has 2 cores)")
    args = parser.parse_args()
    result = measure(
        Path(args.config),
        records=args.records,
        sizes=[int(s) for s in args.sizes.split(",")],
        partitions=args.partitions,
        repeat=args.repeat,
        tasks=args.tasks,
    )
    print(json.dumps(result["summary"], indent=2))


if __name__ == "__main__":
    main()
