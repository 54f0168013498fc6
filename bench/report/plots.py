"""The report's plots: throughput and latency of both tools, and records/s against topics and partitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOT = "throughput_latency.png"


SCALE_PLOT = "scale.png"


TOOL_NAMES = {
    "limit": "limit",
    "mm2": "MirrorMaker 2",
    "eos_on": "ours, exactly once",
    "eos_off": "ours, at least once",
}


def plot(results: dict[str, Any], path: Path) -> None:
    """Throughput per record size (bars with min-max), latency percentiles ours against MM2, and
    ours against transaction.interval.ms."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, middle, right) = plt.subplots(1, 3, figsize=(17, 4.5))
    summary = results["throughput"]["summary"]
    sizes = list(summary)
    tools = ("limit", "mm2", "eos_on", "eos_off")
    width = 0.2
    for i, tool in enumerate(tools):
        rows = [summary[s][tool] if tool == "limit" else summary[s][tool]["copy_records_per_s"] for s in sizes]
        medians = [r["median"] for r in rows]
        errors = [[r["median"] - r["min"] for r in rows], [r["max"] - r["median"] for r in rows]]
        xs = [j + (i - 1.5) * width for j in range(len(sizes))]
        left.bar(xs, medians, width, yerr=errors, capsize=3, label=TOOL_NAMES[tool])
    left.set_xticks(range(len(sizes)), [f"{s} B records" for s in sizes])
    left.set_ylabel("records/s (median, min-max)")
    left.set_title(f"Throughput, {results['throughput']['records']:,} records")
    left.legend(fontsize=8)
    keys = ("p50_ms", "p95_ms", "p99_ms", "max_ms")
    bars = [
        (f"{name} @ {run['rate']:,}/s", run[key])
        for run in results["latency"]["runs"]
        for name, key in (("MM2", "mirrormaker2"), ("ours", "ours_exactly_once"))
    ]
    width = 0.8 / len(bars)
    for i, (name, row) in enumerate(bars):
        middle.bar(
            [j + (i - (len(bars) - 1) / 2) * width for j in range(len(keys))], [row[k] for k in keys], width, label=name
        )
    middle.set_xticks(range(len(keys)), [k.split("_")[0] for k in keys])
    middle.set_yscale("log")
    middle.set_ylabel("end-to-end latency, ms (log scale)")
    middle.set_title("Latency, continuous mode")
    middle.legend(fontsize=8)
    sw = results["latency"].get("sweep")
    if sw:
        intervals = [row["transaction_interval_ms"] for row in sw["sweep"]]
        for key in ("p50_ms", "p99_ms"):
            right.plot(intervals, [row[key] for row in sw["sweep"]], marker="o", label=f"ours {key.split('_')[0]}")
        right.set_xscale("log")
        right.set_yscale("log")
        right.set_xlabel("transaction.interval.ms")
        right.set_ylabel("latency, ms")
        right.set_title(f"Ours against transaction.interval.ms, {sw['rate']:,}/s")
        right.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def plot_scale(sc: dict[str, Any], path: Path) -> None:
    """Records/s of both tools against the number of topics and against the partitions of one topic."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for axis, rows, key, label in (
        (axes[0], sc["topics"], "topics", "topics of one partition, 100 B records, continuous"),
        (axes[1], sc["partitions"], "partitions", "partitions of one topic, 1 KiB records, available-now"),
    ):
        for tool, name in (("mirrormaker2", "MirrorMaker 2"), ("ours", "ours, exactly once")):
            points = [(row[key], row[tool]["copy_records_per_s"]) for row in rows if row[tool]["copy_records_per_s"]]
            axis.plot([x for x, _ in points], [y for _, y in points], marker="o", label=name)
        axis.set_xscale("log")
        axis.set_xlabel(label)
        axis.set_ylabel("records/s")
        axis.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
