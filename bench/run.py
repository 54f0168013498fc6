"""Every benchmark side by side in one run: ``make bench`` (full) and ``make bench-quick``.

    .venv/bin/python -m bench.run [--preset full|quick] [--out bench] [--config conf/srm.yaml]

On the local clusters of the config's first flow (``make kafka-up``): throughput (the brokers'
limit, MirrorMaker 2, ours with exactly-once on and off), latency under a steady producer,
failover accuracy, scale (partitions, topics, time to replicate a new topic) and a profile of
the copy tasks. Writes ``<out>/results.json`` (every figure and run, the commands, versions,
the machine), ``<out>/REPORT.md`` and ``<out>/throughput_latency.png``. ``full`` is what
bench/REPORT.md holds (about 50 minutes here); ``quick`` runs every part on the smallest inputs
in about 8 minutes, to check the benchmarks work, not to quote. ``--only throughput,latency``
measures those parts again into the ``<out>/results.json`` of an earlier run of the same preset
and keeps the others; the report says when each part was measured.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shlex
import sys
import time
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any

from bench import (
    aggregation,
    checkpoints_scale,
    cluster,
    copy_profile,
    failover_accuracy,
    latency,
    monitoring,
    report,
    rest_metrics,
    scale,
    throughput,
)
from bench.report.copying import latency_bounds, ratio
from bench.report.plots import PLOT
from bench.report.scaling import first_record, scale_ratio, secs
from srm.config import load_config

PRESETS: dict[str, dict[str, Any]] = {
    "full": {
        "throughput": {"records": 1_000_000, "sizes": [1024, 100], "partitions": 8, "repeat": 3},
        "latency": {
            "rates": [5000, 50_000],
            "seconds": 30,
            "warmup_seconds": 5,
            "partitions": 8,
            "sweep": [25, 50, 100, 250, 1000],
        },
        "failover": {"per_partition": 10_000, "partitions": 8},
        "scale": {
            "partitions": [8, 512, 2048],
            "records": 200_000,
            "topics": [1, 100, 1000, 2000],
            "per_topic": 100,
            "idle_topics": 2000,
            "repeat": 3,
        },
        "aggregation": {"sources": 3, "topics": 100, "per_topic": 1000},
        "checkpoints": {"groups": 1000, "partitions": 10_000, "topics": 100, "per_group": 100, "records": 100},
        "profile": {"records": 300_000, "size": 100, "partitions": 8},
        "cluster": {
            "records": 4_000_000,
            "size": 1024,
            "partitions": [64, 512],
            "tasks": 4,
            "workers": [1, 2],
            "repeat": 3,
        },
        "rest": {"topics": 100, "days": 30, "requests": 50},
        "monitoring": {"partitions": 10_000, "topics": 100, "records": 10, "requests": 50},
    },
    "quick": {
        "throughput": {"records": 20_000, "sizes": [100], "partitions": 2, "repeat": 1},
        # 30 s: a run of ours outlasts its first lease, whose log line gives the sweep's commit rate
        "latency": {"rates": [500], "seconds": 30, "warmup_seconds": 1, "partitions": 2, "sweep": [100]},
        "failover": {"per_partition": 1000, "partitions": 2},
        "scale": {
            "partitions": [2],
            "records": 10_000,
            "topics": [2],
            "per_topic": 20,
            "idle_topics": 2,
            "idle_settle_s": 1.0,
            "idle_window_s": 10.0,
        },
        "aggregation": {"sources": 2, "topics": 2, "per_topic": 10},
        "checkpoints": {"groups": 20, "partitions": 40, "topics": 2, "per_group": 10, "records": 10},
        "profile": {"records": 20_000, "size": 100, "partitions": 2},
        "cluster": {"records": 20_000, "size": 100, "partitions": [4], "tasks": 2, "workers": [2]},
        "rest": {"topics": 5, "days": 2, "requests": 5},
        "monitoring": {"partitions": 40, "topics": 2, "records": 10, "requests": 10},
    },
}
KAFKA_VERSION = "4.3.1"  # conf/jvm/kafka/pom.xml


def machine() -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor() or "unknown CPU",
    )
    memory_kib = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if "MemTotal" in line
    )
    return {
        "cores": os.cpu_count(),
        "memory_gib": round(memory_kib / 2**20),
        "arch": platform.machine(),
        "kernel": platform.release(),
        "cpu": cpu,
        "python": platform.python_version(),
    }


def versions() -> dict[str, str]:
    import confluent_kafka

    found = {name: version(name) for name in ("pyspark", "confluent-kafka", "apache-airflow", "deltalake")}
    return found | {"librdkafka": confluent_kafka.libversion()[0], "kafka": KAFKA_VERSION}


def command(module: str, options: dict[str, Any]) -> str:
    """The command that measures one part alone with the same inputs."""
    flags = []
    for key, value in options.items():
        text = ",".join(str(v) for v in value) if isinstance(value, list) else str(value)
        flags += [f"--{key.replace('_', '-')}", text]
    return f".venv/bin/python -m bench.{module} {shlex.join(flags)}"


def findings(results: dict[str, Any]) -> list[str]:
    """One line per question the benchmarks answer, with the ratios."""
    lines = []
    for size, s in results["throughput"]["summary"].items():
        lines.append(
            f"- Throughput, {size} B records: ours (exactly once) / MirrorMaker 2 = **{s['eos_on_vs_mm2']}**, "
            f"ours / limit = **{s['eos_on_vs_limit']}** (MM2 / limit = {s['mm2_vs_limit']}; at least once: "
            f"ours / MM2 = {s['eos_off_vs_mm2']})."
        )
    for lat in results["latency"]["runs"]:
        ours, theirs = lat["ours_exactly_once"], lat["mirrormaker2"]
        p50, p99 = latency_bounds(lat)
        lines.append(
            f"- Latency at {lat['rate']:,} records/s (transaction.interval.ms {lat['transaction_interval_ms']}): "
            f"p50 ours {ours['p50_ms']:,.0f} ms vs MirrorMaker 2 {theirs['p50_ms']:,.0f} ms "
            f"(ours / MM2 = **{ratio(ours['p50_ms'], theirs['p50_ms'])}**, bound 2: {p50}), "
            f"p99 {ours['p99_ms']:,.0f} vs {theirs['p99_ms']:,.0f} ms "
            f"(ours / MM2 = **{ratio(ours['p99_ms'], theirs['p99_ms'])}**, bound 1: {p99})."
        )
    fo = results["failover"]
    lines.append(
        f"- Failover: MirrorMaker 2's checkpoints make the group re-read {fo['mirrormaker2']['re_read']:,} and skip "
        f"{fo['mirrormaker2']['skipped']:,} records; ours re-read {fo['ours']['re_read']:,} and skip "
        f"{fo['ours']['skipped']:,}."
    )
    unresolved = "not resolved (each tool's whole copy arrived between two polls of the target)"
    for row in results["scale"]["partitions"]:
        lines.append(
            f"- Scale, {row['partitions']} partition(s): ours / MirrorMaker 2 = {scale_ratio(row) or unresolved}."
        )
    for row in results["scale"]["topics"]:
        lines.append(
            f"- Scale, {row['topics']} topic(s): ours / MirrorMaker 2 = {scale_ratio(row) or unresolved}; "
            f"the first record on the target {first_record(row['ours'])} (ours) and "
            f"{first_record(row['mirrormaker2'])} (MM2) after the start; a new topic's first record on the target "
            f"after {secs(row['ours']['new_topic_seconds'])} (ours) and "
            f"{secs(row['mirrormaker2']['new_topic_seconds'])} (MM2, topic refresh every 5 s)."
        )
    agg = results.get("aggregation")
    if agg:
        checked = {
            tool: "{missing} / {duplicated} / {out_of_order}".format(**agg[tool]) for tool in ("ours", "mirrormaker2")
        }
        lines.append(
            f"- Aggregation, {agg['sources']} source clusters x {agg['topics_per_source']} topics into one target: "
            f"ours / MirrorMaker 2 = {agg['ours_vs_mm2']}; missing / duplicated / out of order: ours "
            f"{checked['ours']}, MM2 {checked['mirrormaker2']}."
        )
    cp = results.get("checkpoints")
    if cp:
        lines.append(
            f"- Checkpoints at scale: one pass over {cp['groups']:,} groups ({cp['group_offsets']:,} group positions "
            f"on {cp['partitions']:,} partitions) in {cp['pass_seconds']} s, peak memory of its job "
            f"{cp['job_peak_pss_mb']:,} MB (PSS)."
        )
    for row in results["cluster"]["rows"]:
        if "workers" not in row:
            continue
        lines.append(
            f"- Spark standalone cluster, {row['workers']} worker(s) on this machine: {row['job_records_per_s']:,} "
            f"records/s, {row['vs_local']}x `local[*, 4]` ({row.get('copying_vs_local', '-')}x while copying; "
            f"{row['partitions']} partitions of {row['record_size']} B)."
        )
    slowest = max(results["rest"]["endpoints"], key=lambda e: e["p95_ms"])
    lines.append(
        f"- REST metric endpoints over {results['rest']['rows_in_warehouse']:,} metrics rows: slowest p95 "
        f"{slowest['p95_ms']} ms ({slowest['endpoint']})."
    )
    mon = results.get("monitoring")
    if mon:
        last = mon["rounds"][-1]
        lines.append(
            f"- Monitoring at {mon['partitions']:,} partitions: a Prometheus scrape p99 {mon['scrape']['p99_s']} s "
            f"({last['series']:,} series, rendered in {last['render_s']} s per round); `/v2/replications` p99 "
            f"{mon['replications_frozen']['p99_s']} s with the target's broker frozen."
        )
    shares = results["profile"]["shares"]
    top = next(iter(shares))
    lines.append(f"- Profile of the copy tasks (100 B records): the largest share is {top} ({shares[top]:.0%}).")
    return lines


Measure = Callable[[Path, dict[str, Any]], dict[str, Any]]  # (config, the preset's options) -> figures
# The parts of a run, in order: key in results.json -> (module that measures it alone, how).
STEPS: dict[str, tuple[str, Measure]] = {
    "throughput": ("throughput", lambda config, o: throughput.measure(config, tasks=2, **o)),
    "latency": (
        "latency",
        lambda config, o: latency.measure(
            config,
            rates=o["rates"],
            seconds=o["seconds"],
            warmup_seconds=o["warmup_seconds"],
            partitions=o["partitions"],
            sweep_ms=o["sweep"],
        ),
    ),
    "failover": (
        "failover_accuracy",
        lambda config, o: failover_accuracy.run(config, o["per_partition"], o["partitions"]),
    ),
    "scale": ("scale", lambda config, o: scale.measure(config, **o)),
    "aggregation": ("aggregation", lambda config, o: aggregation.measure(config, **o)),
    "checkpoints": ("checkpoints_scale", lambda config, o: checkpoints_scale.measure(config, **o)),
    "profile": ("copy_profile", lambda config, o: copy_profile.measure(config, **o)),
    "cluster": ("cluster", lambda config, o: cluster.measure(config, **o)),
    "rest": ("rest_metrics", lambda config, o: rest_metrics.measure(**o)),
    "monitoring": ("monitoring", lambda config, o: monitoring.measure(config, **o)),
}


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def earlier(path: Path, preset: str, only: list[str]) -> dict[str, Any]:
    """The results of an earlier full run of ``preset`` at ``path``, whose parts ``only`` are measured again."""
    unknown = sorted(set(only) - set(STEPS))
    if unknown:
        raise SystemExit(f"--only: no part named {', '.join(unknown)}; the parts are {', '.join(STEPS)}")
    if not path.is_file():
        raise SystemExit(f"--only measures parts again into an earlier run's results: {path} does not exist")
    results: dict[str, Any] = json.loads(path.read_text())
    if results.get("preset") != preset:
        raise SystemExit(f"{path} holds a run of preset {results.get('preset')!r}, not {preset!r}: run it in full")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", choices=sorted(PRESETS), default="full")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    parser.add_argument("--config", type=Path, default=Path("conf/srm.yaml"))
    parser.add_argument(
        "--only", type=lambda text: text.split(","), help=f"comma-separated parts to measure again: {', '.join(STEPS)}"
    )
    args = parser.parse_args()
    p = PRESETS[args.preset]
    started = time.monotonic()
    if args.only:
        results = earlier(args.out / "results.json", args.preset, args.only)
    else:
        flow = load_config(args.config).enabled_flows()[0]
        results = {
            "command": "python -m bench.run " + shlex.join(sys.argv[1:]),
            "preset": args.preset,
            "source": flow.source,
            "target": flow.target,
            "json": "results.json",
            "machine": machine(),
            "versions": versions(),
        }
    steps = [(key, *STEPS[key]) for key in STEPS if not args.only or key in args.only]
    for number, (key, module, measure) in enumerate(steps, 1):
        print(f"[{number}/{len(steps)}] {key} ({time.monotonic() - started:.0f} s so far)", flush=True)
        began = time.monotonic()
        results[key] = {"command": command(module, p[key]), **measure(args.config, p[key])}
        results[key]["step_seconds"] = round(time.monotonic() - began)
        results[key]["finished"] = now()
        if args.only:
            results[key]["again"] = True  # measured apart from the run the others come from
        throughput.drop_bench_topics(args.config)
    results["findings"] = findings(results)
    if not args.only:
        results["seconds"] = round(time.monotonic() - started)
        results["finished"] = now()
    report.write(results, args.out)
    print(f"wrote {args.out / 'REPORT.md'}, {args.out / 'results.json'} and {args.out / PLOT}", flush=True)
    print("\n".join(results["findings"]))


if __name__ == "__main__":
    main()
