"""The report's throughput and latency sections: ours against MirrorMaker 2 and the machine's limit."""

from __future__ import annotations

from typing import Any

# Measurements made outside `make bench`, dated, live in the docs; the report links them.
NOTES = (
    "Dated lab notes measured outside `make bench`: "
    "[docs/benchmarks/lab-notes.md](../docs/benchmarks/lab-notes.md#{section})."
)


def cell(x: dict[str, float]) -> str:
    return f"{x['median']:,} [{x['min']:,}-{x['max']:,}]"


def throughput(t: dict[str, Any]) -> list[str]:
    lines = [
        f"## Throughput (records/s; median of {t['repeat']}, min-max in brackets; {t['records']:,} records, "
        f"{t['partitions']} partitions)",
        "",
        f"Command: `{t['command']}`. MirrorMaker 2: Apache Kafka's own, defaults, `tasks.max` = "
        f"{t['partitions']}; ours: `replicate.py --mode available-now`, `tasks.max` = {t['tasks']}.",
        "",
        "| record size | limit (min of produce/consume) | MirrorMaker 2 | ours, exactly once | ours, at least once "
        "| ours EOS / MM2 | ours EOS / limit | ours ALO / MM2 | MM2 / limit |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for size, s in t["summary"].items():
        lines.append(
            f"| {size} B | {cell(s['limit'])} | {cell(s['mm2']['copy_records_per_s'])} "
            f"| {cell(s['eos_on']['copy_records_per_s'])} | {cell(s['eos_off']['copy_records_per_s'])} "
            f"| **{s['eos_on_vs_mm2']}** | {s['eos_on_vs_limit']} | {s['eos_off_vs_mm2']} | {s['mm2_vs_limit']} |"
        )
    lines += [
        "",
        "| record size | MB/s: MM2 / ours EOS / ours ALO | CPU s: MM2 / ours EOS / ours ALO "
        "| peak memory MiB, PSS: MM2 / ours EOS / ours ALO | peak memory MiB, RSS: MM2 / ours EOS / ours ALO "
        "| whole job incl. start-up, records/s: MM2 / ours EOS |",
        "|---|---|---|---|---|---|",
    ]
    for size, s in t["summary"].items():

        def three(key: str, s: dict[str, Any] = s) -> str:
            return " / ".join(f"{s[tool][key]['median']:,}" for tool in ("mm2", "eos_on", "eos_off"))

        lines.append(
            f"| {size} B | {three('copy_mb_per_s')} | {three('cpu_seconds')} | {three('peak_pss_mb')} "
            f"| {three('peak_rss_mb')} "
            f"| {s['mm2']['job_records_per_s']['median']:,} / {s['eos_on']['job_records_per_s']['median']:,} |"
        )
    lines += [
        "",
        "Both replicators are timed the same way: from the first record written to the target (high",
        "watermark) until the last is visible to a read_committed consumer (last stable offset), polled every",
        "0.1 s (`bench/watch.py`); their start-up is excluded there and included in the whole-job column",
        "(Spark's start costs ours ~20 s; it is paid once in continuous mode). The limit is the slowest of",
        "Kafka's ProducerPerformance into the source, ConsumerPerformance out of it and ProducerPerformance into",
        "the target, each one client: a copy with several producers can reach it, and ours / limit near 1 means",
        "the brokers on these 2 cores, not the copy, set the pace. CPU is user + system of",
        "the process tree each tool started (Spark's forked Python workers may be missing: ours is a lower",
        "bound). Memory is the peak of the tree's proportional set size (PSS: a page shared by several",
        "processes counts once, split between them) and of its resident sets (RSS: a shared page counts in",
        "every process; Spark's Python workers are forked from one daemon and share its pages, so the RSS sum",
        "overstates ours). For one JVM (MirrorMaker 2) the two nearly agree.",
        "",
        *memory(t),
    ]
    for size, s in t["summary"].items():
        ratio = s["eos_on_vs_mm2"]
        verdict = "ahead of" if ratio >= 1 else "**behind**"
        lines.append(
            f"- {size} B: ours (exactly once) is {ratio}x MirrorMaker 2 ({verdict} it) and {s['eos_on_vs_limit']}x "
            f"the brokers' limit; {cost(s)}."
        )
    return [*lines, "", NOTES.format(section="throughput")]


def memory(t: dict[str, Any]) -> list[str]:
    """Where ours' memory is, at the PSS peak of its first exactly-once run of the largest records."""
    runs = [r for r in t.get("runs", []) if r.get("eos_on", {}).get("processes_at_peak")]
    if not runs:
        return []
    run = max(runs, key=lambda r: r["size"])
    top = [f"{what} {mib:,}" for what, mib in run["eos_on"]["processes_at_peak"][:8]]
    theirs = run["mm2"].get("processes_at_peak", [])[:2]
    return [
        f"At its memory peak ({run['size']} B records), ours' process tree held (PSS MiB): {'; '.join(top)}. "
        f"MirrorMaker 2's: {'; '.join(f'{what} {mib:,}' for what, mib in theirs)}.",
        "",
    ]


def cost(s: dict[str, Any]) -> str:
    on, off = s["eos_on"]["copy_records_per_s"]["median"], s["eos_off"]["copy_records_per_s"]["median"]
    percent = round(100 * (1 - on / off)) if off else 0
    if percent > 0:
        return f"exactly-once costs {percent}% against at-least-once"
    return f"exactly-once was not slower than at-least-once ({-percent}% faster, within the spread)"


def ratio(ours: float, theirs: float) -> float:
    return round(ours / theirs, 2) if theirs else float("inf")


def latency_bounds(lat: dict[str, Any]) -> tuple[str, str]:
    """Whether ours meets the targets: p50 at most 2x MirrorMaker 2's, p99 at most MM2's."""
    ours, theirs = lat["ours_exactly_once"], lat["mirrormaker2"]
    p50 = "met" if ours["p50_ms"] <= 2 * theirs["p50_ms"] else "**missed**"
    p99 = "met" if ours["p99_ms"] <= theirs["p99_ms"] else "**missed**"
    return p50, p99


def latency(lat: dict[str, Any]) -> list[str]:
    runs = lat["runs"]
    first = runs[0]
    seconds = first.get("warmup_seconds")  # absent from runs made before the load had a warm-up
    warmup_flag = "" if seconds is None else f" --warmup-seconds {seconds}"
    warmup = "" if not seconds else f", then {seconds} s of the load itself, not measured"
    lines = [
        f"## Latency (continuous mode, records of {first['record_size']} B for {first['seconds']} s, "
        f"{first['partitions']} partitions)",
        "",
        f"Command: `{lat['command']}`; one rate alone: `.venv/bin/python -m bench.latency --rate "
        f"{first['rate']} --seconds {first['seconds']}{warmup_flag} --partitions {first['partitions']}`. "
        "Latency = the time a",
        "read_committed consumer on the target receives the record minus its CreateTime (both replicators keep",
        "CreateTime; one clock). Ours runs at its default `transaction.interval.ms`, MirrorMaker 2 with its",
        f"defaults (at-least-once, no transactions); both warmed up with one record per partition first{warmup}.",
        "",
        "| rate (records/s) | tool | records | p50 | p95 | p99 | max | p50 ours/MM2 (target <= 2) "
        "| p99 ours/MM2 (target <= 1) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for run in runs:
        ours, theirs = run["ours_exactly_once"], run["mirrormaker2"]
        p50, p99 = latency_bounds(run)
        interval = run["transaction_interval_ms"]
        for name, row, ratios in (
            ("MirrorMaker 2", theirs, ("", "")),
            (
                f"ours, exactly once ({interval} ms transactions)",
                ours,
                (
                    f"{ratio(ours['p50_ms'], theirs['p50_ms'])} ({p50})",
                    f"{ratio(ours['p99_ms'], theirs['p99_ms'])} ({p99})",
                ),
            ),
        ):
            lines.append(
                f"| {run['rate']:,} | {name} | {row['records']:,} | {row['p50_ms']:,.0f} ms | {row['p95_ms']:,.0f} ms "
                f"| {row['p99_ms']:,.0f} ms | {row['max_ms']:,.0f} ms | {ratios[0]} | {ratios[1]} |"
            )
    lines += [
        "",
        "How a record travels in ours: the copy tasks hold their partitions for a lease (`task.lease.seconds`,",
        "30 s; a run's first lease at most 5 s) and poll without pause; the records polled go into an",
        "open Kafka transaction, which is committed, together with the offset runs and the progress of its",
        "partitions, as soon as the task",
        "has caught up (its consumer holds no more records), at the latest `transaction.interval.ms` after",
        "its first record. A read_committed consumer sees a record at that commit, so under a load the copy",
        "keeps up with a record waits for the commit in progress and its own (a few ms each on these",
        "brokers), and the interval matters only when the copy falls behind; MirrorMaker 2 sends records as",
        "it polls them and its consumers see them when the broker has them. Each slot alternates two",
        "transactional producers, so the next transaction starts while the coordinator still writes the",
        "last one's markers: with one producer, its first records waited for librdkafka's 20 ms backoff",
        "after the coordinator's CONCURRENT_TRANSACTIONS answer (not in this run; the before and after",
        "figures are in the lab notes, docs/benchmarks/lab-notes.md).",
        "",
    ]
    lines += verdict(runs)
    lines += sweep_table(lat.get("sweep"), runs[0]["mirrormaker2"])
    return lines


def verdict(runs: list[dict[str, Any]]) -> list[str]:
    missed = [run for run in runs if "missed" in "".join(latency_bounds(run))]
    if missed:
        rates = ", ".join(f"{run['rate']:,}" for run in missed)
        head = f"**Ours misses a target at {rates} records/s** (p50 at most 2x MirrorMaker 2's, p99 at most MM2's)."
    else:
        head = "Ours meets both targets at every rate measured in this run."
    return [head, "", NOTES.format(section="latency")]


def sweep_table(sw: dict[str, Any] | None, mm2: dict[str, Any]) -> list[str]:
    if not sw:
        return []
    meeting = [
        row["transaction_interval_ms"]
        for row in sw["sweep"]
        if row["p50_ms"] <= 2 * mm2["p50_ms"] and row["p99_ms"] <= mm2["p99_ms"]
    ]
    which = (
        f"meets both targets against MirrorMaker 2's run above at {', '.join(map(str, meeting))} ms"
        if meeting
        else "meets both targets against MirrorMaker 2's run above at none of these intervals"
    )
    lines = [
        f"### Latency against `transaction.interval.ms` (ours alone, {sw['rate']:,} records/s, "
        f"{sw['partitions']} partitions)",
        "",
        "| transaction.interval.ms | records | p50 | p95 | p99 | max "
        "| commits per partition per s (whole run, idle included) |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in sw["sweep"]:
        commits = "-" if row.get("commits_per_s") is None else f"{row['commits_per_s']:,}"
        lines.append(
            f"| {row['transaction_interval_ms']:,} | {row['records']:,} | {row['p50_ms']:,.0f} ms "
            f"| {row['p95_ms']:,.0f} ms | {row['p99_ms']:,.0f} ms | {row['max_ms']:,.0f} ms | {commits} |"
        )
    lines += [
        "",
        f"Ours {which}.",
        "A shorter interval buys latency with transactions: every commit writes a transaction marker into",
        "each partition it touched (data, offset runs, progress) and one offset-run row per partition, so the",
        "target's offsets and the history grow with the commit rate, not with the records.",
        "",
    ]
    return lines
