"""The report's section on ours against Kafka's transactions alone (``bench.eos_floor --out``, run by
hand): per rate and round, each tool's p50/p99, and issue 45's two bounds (ours' p99 at most 1.25x the
textbook exactly-once copier's, ours with ``exactly_once: false`` at most MirrorMaker 2's)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.eos_floor import AT_LEAST_ONCE, FILE, TEXTBOOK, TEXTBOOK_JAVA

OURS = "ours_exactly_once"
MM2 = "mirrormaker2"
# Issue 45's bounds on the benchmark's own per-round ratios (bench.eos_floor.PAIRS, p99_ratios):
# (ratio, at most, what the pair is)
BOUNDS = (
    ("ours_vs_textbook", 1.25, "ours exactly once / the textbook exactly-once copier"),
    ("ours_at_least_once_vs_mirrormaker2", 1.0, "ours at least once / MirrorMaker 2"),
)
COLUMNS = (
    (OURS, "ours, exactly once"),
    (TEXTBOOK, "textbook copier (Python)"),
    (TEXTBOOK_JAVA, "textbook copier (Java)"),
    (AT_LEAST_ONCE, "ours, at least once"),
    (MM2, "MirrorMaker 2"),
)


def floor(folder: Path) -> str:
    """The section, from ``folder``'s eos_floor.json; empty when there is none."""
    found = folder / FILE
    if not found.exists():
        return ""
    result = json.loads(found.read_text())
    first = result["rates"][0]
    lines = [
        "## Exactly once against Kafka's transactions alone",
        "",
        f"`{result['command']}` (finished {result['finished']}, {result['minutes']} min; run by hand, not part of",
        "`make bench`). Each round runs the latency load above",
        f"({first['record_size']} B records over {first['partitions']} partitions, {first['warmup_seconds']} s of",
        f"warm-up, then {first['seconds']} s measured) once with each tool, each round starting with the next",
        "tool. The textbook copiers are Kafka's own consume-transform-produce in transactions, committed as",
        "soon as they have caught up, with nothing of ours (no Spark, no history, no progress, no ownership):",
        "what a copier built on Kafka transactions gets on these brokers. Ours at least once runs with",
        "`exactly_once: false` (an idempotent producer, no transactions), MirrorMaker 2's guarantee.",
        '"Brokers up" is how long the youngest local broker had been running when the round began: a',
        "round right after `make demo` is cold; in a round run with `--cold`, the brokers were restarted",
        "before each tool's run, so that every tool met them as cold (the range: when each run began).",
        "p50 / p99 in ms.",
        "",
    ]
    for measured in result["rates"]:
        lines += rate_table(measured)
    lines += [
        "What the stalls that remain cost, run by run (lease changes, the target's collections, Spark's",
        "JIT at a run's first leases): [docs/benchmarks/lab-notes.md](../docs/benchmarks/lab-notes.md#latency).",
        "",
    ]
    return "\n".join(lines)


def rate_table(measured: dict[str, Any]) -> list[str]:
    runs = measured["runs"]
    tools = [(key, name) for key, name in COLUMNS if key in runs]
    ratios = measured["p99_ratios"]
    bounds = [b for b in BOUNDS if b[0] in ratios]
    lines = [
        f"### {measured['rate']:,} records/s",
        "",
        "| round | brokers up (min) | "
        + " | ".join(name for _, name in tools)
        + "".join(f" | {what} (p99, at most {limit})" for _, limit, what in bounds)
        + " |",
        "|---|---|" + "---|" * (len(tools) + len(bounds)),
    ]
    uptimes = measured.get("brokers_up_s") or [{}] * measured["rounds"]
    for index in range(measured["rounds"]):
        up = min(uptimes[index].values()) / 60 if uptimes[index] else None
        shown = "-" if up is None else f"{up:,.1f}"
        if index + 1 in measured.get("cold_rounds", []):
            each = [runs[key][index]["brokers_up_s"] / 60 for key, _ in tools]
            shown = f"{min(each):.1f}-{max(each):.1f}, restarted before each tool"
        cells = [f"{runs[key][index]['p50_ms']} / {runs[key][index]['p99_ms']}" for key, _ in tools]
        for name, limit, _ in bounds:
            ratio = ratios[name][index]
            cells.append(f"{ratio}" if ratio <= limit else f"**{ratio}**")
        lines.append(f"| {index + 1} | {shown} | " + " | ".join(cells) + " |")
    lines.append("")
    for name, limit, what in bounds:
        missed = [str(i + 1) for i, ratio in enumerate(ratios[name]) if ratio > limit]
        verdict = "met in every round" if not missed else f"**missed** in round(s) {', '.join(missed)}"
        lines.append(f"- {what}, p99 at most {limit}x: {verdict}.")
    spread = spreads(runs, tools)
    if spread:
        lines.append(
            "- Each tool against itself over these rounds, p99 max / min (the spread a round's ratio carries "
            "with it on these brokers): " + "; ".join(spread) + "."
        )
    lines.append("")
    return lines


def spreads(runs: dict[str, list[dict[str, Any]]], tools: list[tuple[str, str]]) -> list[str]:
    """Per tool run more than once: its p99's largest over its smallest across the rounds."""
    shown = []
    for key, name in tools:
        p99s = [run["p99_ms"] for run in runs[key]]
        if len(p99s) > 1 and min(p99s) > 0:
            shown.append(f"{name} {max(p99s) / min(p99s):.2f}")
    return shown
