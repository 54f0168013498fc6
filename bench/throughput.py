"""Throughput side by side: the brokers' limit, Apache Kafka's MirrorMaker 2, and our replicate job.

    .venv/bin/python -m bench.throughput [--records 1000000] [--sizes 1024,100] [--partitions 8] [--repeat 3]

On the local clusters (``make kafka-up``), per record size and repetition: (a) the limit — Kafka's
ProducerPerformance into the source, ConsumerPerformance out of it, ProducerPerformance into the
target; (b) MirrorMaker 2 with its defaults and ``tasks.max`` = partitions (bench.mm2); (c) our
job in available-now mode with exactly-once on and off (bench.available_now). Writes
``bench/throughput.json`` (every run, the command, versions, the machine) and the throughput
section of ``bench/REPORT.md``: medians with min-max spread, ours/MM2 and ours/limit.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import uuid
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench import available_now, mm2
from srm import clients
from srm.config import load_config
from srm.jvm import kafka_command
from srm.topics import ensure_topic

HERE = Path(__file__).parent


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
        "org.apache.kafka.tools.ProducerPerformance",
        *("--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1"),
        *("--bootstrap-server", bootstrap, "--command-property", "acks=all", "linger.ms=10", "batch.size=262144"),
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
        admin = clients.admin_client(config.cluster(alias))
        doomed = [t for t in admin.list_topics(timeout=30).topics if "bench-" in t]
        if doomed:
            for future in admin.delete_topics(doomed).values():
                future.result(60)


def spread(values: list[float]) -> dict[str, float]:
    return {"median": round(statistics.median(values)), "min": round(min(values)), "max": round(max(values))}


def summarize(runs: list[dict[str, Any]], size: int) -> dict[str, Any]:
    mine = [r for r in runs if r["size"] == size]
    lim = spread([r["limit"]["limit_records_per_s"] for r in mine])
    mm = spread([r["mm2"]["copy_records_per_s"] for r in mine])
    out: dict[str, Any] = {"limit": lim, "mm2": mm}
    out["mm2_cpu_s"] = spread([r["mm2"]["cpu_seconds"] for r in mine])
    out["mm2_peak_rss_mb"] = spread([r["mm2"]["peak_rss_mb"] for r in mine])
    for mode in ("eos_on", "eos_off"):
        ours = spread([r[mode]["batch_records_per_s"] for r in mine])
        out[mode] = ours
        out[f"{mode}_job"] = spread([r[mode]["job_records_per_s"] for r in mine])
        out[f"{mode}_cpu_s"] = spread([r[mode]["cpu_seconds"] for r in mine])
        out[f"{mode}_peak_rss_mb"] = spread([r[mode]["peak_rss_mb"] for r in mine])
        out[f"{mode}_vs_mm2"] = round(ours["median"] / mm["median"], 2)
        out[f"{mode}_vs_limit"] = round(ours["median"] / lim["median"], 2)
    return out


def report(result: dict[str, Any]) -> str:
    lines = [
        "## Throughput (records/s; median of "
        f"{result['repeat']}, min-max in brackets; {result['records']:,} records, {result['partitions']} partitions)",
        "",
        f"Command: `{result['command']}` on {result['machine']}.",
        "",
        "| record size | limit (min of produce/consume) | MirrorMaker 2 | ours, exactly once | ours, at least once "
        "| ours EOS / MM2 | ours EOS / limit | ours ALO / MM2 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size, s in result["summary"].items():

        def cell(x: dict[str, float]) -> str:
            return f"{x['median']:,} [{x['min']:,}-{x['max']:,}]"

        lines.append(
            f"| {size} B | {cell(s['limit'])} | {cell(s['mm2'])} | {cell(s['eos_on'])} | {cell(s['eos_off'])} "
            f"| {s['eos_on_vs_mm2']} | {s['eos_on_vs_limit']} | {s['eos_off_vs_mm2']} |"
        )
    lines += [
        "",
        "| record size | CPU s: MM2 / ours EOS / ours ALO | peak memory MiB: MM2 / ours EOS / ours ALO "
        "| whole job incl. start, records/s: ours EOS |",
        "|---|---|---|---|",
    ]
    for size, s in result["summary"].items():
        lines.append(
            f"| {size} B | {s['mm2_cpu_s']['median']} / {s['eos_on_cpu_s']['median']} / {s['eos_off_cpu_s']['median']} "
            f"| {s['mm2_peak_rss_mb']['median']} / {s['eos_on_peak_rss_mb']['median']} / "
            f"{s['eos_off_peak_rss_mb']['median']} | {s['eos_on_job']['median']:,} |"
        )
    lines += [
        "",
        "MM2's figure is its copy rate: from the first record on the target to the last (its start-up of",
        "~5-7 s excluded); ours is the copy batches' own rate from the job's log lines (Spark's start-up",
        "excluded; the whole-job rate is in the last column). CPU is user + system of every process each",
        "started (JVM and Python workers); memory is the peak of the sum of their resident sets.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--sizes", default="1024,100")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=2, help="our tasks.max (the machine has 2 cores)")
    args = parser.parse_args()
    path = Path(args.config)
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = []
    for size in sizes:
        for rep in range(args.repeat):
            run: dict[str, Any] = {"size": size, "repetition": rep}
            print(f"size {size} B, repetition {rep + 1}/{args.repeat}: limit", flush=True)
            run["limit"] = limit(path, args.records, size, args.partitions)
            print("  mirrormaker 2", flush=True)
            run["mm2"] = mm2.run(path, args.records, size, args.partitions)
            for mode, eos in (("eos_on", True), ("eos_off", False)):
                print(f"  ours, {mode}", flush=True)
                run[mode] = available_now.run(
                    path, args.records, size, args.partitions, exactly_once=eos, tasks=args.tasks
                )
            print(f"  {json.dumps({k: v for k, v in run.items() if k not in ('size', 'repetition')})}", flush=True)
            runs.append(run)
            drop_bench_topics(path)
    result = {
        "command": "python -m bench.throughput " + " ".join(sys.argv[1:]),
        "records": args.records,
        "partitions": args.partitions,
        "repeat": args.repeat,
        "machine": f"{os.cpu_count()} cores, {platform.machine()}, Linux {platform.release()}",
        "versions": {p: version(p) for p in ("pyspark", "confluent-kafka", "apache-airflow")} | {"kafka": "4.3.1"},
        "runs": runs,
        "summary": {str(size): summarize(runs, size) for size in sizes},
    }
    (HERE / "throughput.json").write_text(json.dumps(result, indent=2))
    (HERE / "throughput.md").write_text(report(result))
    print(report(result))


if __name__ == "__main__":
    main()
