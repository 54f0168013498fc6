"""``REPORT.md`` and the plot from the figures ``bench.run`` collected (its ``results.json``).

    .venv/bin/python -m bench.report bench/results.json   # render again without measuring

Every number in the report comes from the JSON; the explanations that follow a table are chosen
by what the numbers say (ahead of or behind MirrorMaker 2), not written in advance.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

PLOT = "throughput_latency.png"
SCALE_PLOT = "scale.png"
POLL_S = 0.1  # bench.watch.POLL_S (not imported: rendering needs no Kafka client)
# Measurements made outside `make bench`, dated, live in the docs; the report links them.
NOTES = (
    "Dated lab notes measured outside `make bench`: "
    "[docs/benchmarks/lab-notes.md](../docs/benchmarks/lab-notes.md#{section})."
)
TOOL_NAMES = {
    "limit": "limit",
    "mm2": "MirrorMaker 2",
    "eos_on": "ours, exactly once",
    "eos_off": "ours, at least once",
}


def cell(x: dict[str, float]) -> str:
    return f"{x['median']:,} [{x['min']:,}-{x['max']:,}]"


def header(r: dict[str, Any]) -> list[str]:
    m, v = r["machine"], r["versions"]
    return [
        "# Benchmarks",
        "",
        f"Real numbers from this machine ({m['cores']} cores, {m['memory_gib']} GiB, {m['arch']}, Linux "
        f"{m['kernel']}, {m['cpu']}), measured {r['finished']} in {r['seconds'] / 60:.0f} min by",
        f"`{r['command']}` (preset `{r['preset']}`). Local single-broker KRaft clusters `{r['source']}` ->",
        f"`{r['target']}` from `make kafka-up`: Kafka {v['kafka']}, PySpark {v['pyspark']}, confluent-kafka "
        f"{v['confluent-kafka']} (librdkafka {v['librdkafka']}), Apache Airflow {v['apache-airflow']}.",
        f"Every figure, every run and the exact commands: [`{r['json']}`]({r['json']}).",
        "",
        f"![throughput and latency, ours against MirrorMaker 2]({PLOT})",
        "",
    ]


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


def failover(f: dict[str, Any]) -> list[str]:
    lines = [
        f"## Failover accuracy (one group, {f['partitions']} partitions of {f['per_partition']:,} records, a "
        "different position on each)",
        "",
        f"Command: `{f['command']}`. A consumer starting on the target at the checkpoint's downstream offset,",
        "against where the group had committed on the source (MM2: defaults, checkpoints every second):",
        "",
        "| partition | committed | MM2 checkpoint -> re-read / skipped | ours checkpoint -> re-read / skipped |",
        "|---|---|---|---|",
    ]
    mine = {row["partition"]: row for row in f["ours"]["per_partition"]}
    for row in f["mirrormaker2"]["per_partition"]:
        other = mine.get(row["partition"], {"checkpoint": None})
        lines.append(f"| {row['partition']} | {row['committed']:,} | {moved(row)} | {moved(other)} |")
    theirs, ours = f["mirrormaker2"], f["ours"]
    lines += [
        f"| **total** | | **{theirs['re_read']:,} re-read, {theirs['skipped']:,} skipped** "
        f"| **{ours['re_read']:,} re-read, {ours['skipped']:,} skipped** |",
        "",
        "MirrorMaker 2 translates from sparse offset syncs (`offset.lag.max` 100, and syncs it drops under",
        "load), so a consumer falls back to the last sync before its position; ours translates exactly from",
        "the full history of offset runs.",
        "",
    ]
    return lines


def moved(row: dict[str, Any]) -> str:
    if row.get("checkpoint") is None:
        return "no checkpoint"
    return f"{row['checkpoint']:,} -> {row['re_read']:,} / {row['skipped']:,}"


def scale(sc: dict[str, Any]) -> list[str]:
    lines = [
        "## Scale",
        "",
        f"Command: `{sc['command']}`.",
        "",
        "Partitions: one topic of 1 KiB records; MM2 `tasks.max` = partitions up to 8, ours 2 tasks (available-now);",
        "records/s timed as in the throughput section.",
        "",
        "| partitions | records | MirrorMaker 2 | ours, exactly once | ours / MM2 |",
        "|---|---|---|---|---|",
    ]
    for row in sc["partitions"]:
        floor = at_floor(row["mirrormaker2"]) or at_floor(row["ours"])
        lines.append(
            f"| {row['partitions']} | {row['records']:,} | {rate(row['mirrormaker2'])} "
            f"| {rate(row['ours'])} | {'-' if floor or row['ours_vs_mm2'] is None else row['ours_vs_mm2']} |"
        )
    lines += [
        "",
        "Topics: T topics of one partition with small records (100 B), both in continuous mode on a pattern",
        "(MM2 `tasks.max` = min(T, 8), `refresh.topics.interval.seconds` = 5 instead of its default 600,",
        "which alone would decide the last column); the first record on the target, seconds after the",
        "replicator was started; then a new topic matching the pattern is created with one record: seconds",
        "until that record is on the target.",
        "",
        "| topics | records | MM2 records/s | ours records/s | ours / MM2 | first record: MM2 | ours "
        "| new topic -> first record: MM2 | ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sc["topics"]:
        theirs, ours = row["mirrormaker2"], row["ours"]
        floor = at_floor(theirs) or at_floor(ours)
        lines.append(
            f"| {row['topics']} | {ours['records']:,} | {rate(theirs)} | {rate(ours)} "
            f"| {'-' if floor or row['ours_vs_mm2'] is None else row['ours_vs_mm2']} | {first_record(theirs)} "
            f"| {first_record(ours)} | {secs(theirs['new_topic_seconds'])} "
            f"| {secs(ours['new_topic_seconds'])} |"
        )
    if any(at_floor(row[tool]) for part in ("partitions", "topics") for row in sc[part] for tool in TOOLS):
        lines += [
            "",
            "≥: every record arrived between two polls of the target (0.1 s apart, more when a poll of many "
            "partitions is slow): the figure is the records over that span, a lower bound, not a rate.",
        ]
    idle = sc.get("idle")
    if idle:
        theirs, ours = idle["mirrormaker2"], idle["ours"]
        lines += [
            "",
            f"Idle: both holding {idle['topics']:,} empty topics in continuous mode; CPU seconds per minute of each",
            f"one's process tree over {ours['window_s']:.0f} s, from a minute after every remote topic existed.",
            "",
            "| | MirrorMaker 2 | ours |",
            "|---|---|---|",
            f"| CPU seconds per minute | {theirs['cpu_seconds_per_minute']} | {ours['cpu_seconds_per_minute']} |",
            f"| every remote topic created after (s) | {theirs['remote_topics_after_s']} "
            f"| {ours['remote_topics_after_s']} |",
        ]
    if len(sc["topics"]) > 1 or len(sc["partitions"]) > 1:
        lines += ["", f"![records/s against topics and partitions, both tools]({SCALE_PLOT})"]
    return [*lines, ""]


def checkpoints(c: dict[str, Any]) -> list[str]:
    return [
        "## Checkpoints at scale",
        "",
        f"Command: `{c['command']}`.",
        "",
        f"{c['groups']:,} consumer groups on the source, each with committed offsets on {c['per_group']:,} partitions "
        f"drawn at random among {c['partitions']:,} ({c['topics']} topics of {c['records']} records a partition, "
        "copied first by an available-now run); then one checkpoints job (`spark-submit checkpoints.py`) translates "
        "every group position and writes the checkpoints. The pass is its own duration as the job logs it; the job "
        "adds Spark's start; memory and CPU are its whole process tree's.",
        "",
        "| groups | group positions | checkpoints written | pass (s) | job (s) | peak PSS (MB) | peak RSS (MB) "
        "| CPU (s) |",
        "|---|---|---|---|---|---|---|---|",
        f"| {c['groups_seen']:,} | {c['group_offsets']:,} | {c['checkpoints_written']:,} | {c['pass_seconds']} "
        f"| {c['job_seconds']} | {c['job_peak_pss_mb']:,} | {c['job_peak_rss_mb']:,} | {c['job_cpu_seconds']} |",
        "",
    ]


def monitoring(m: dict[str, Any]) -> list[str]:
    rows = [
        f"| {i + 1} | {r['observe_s']} | {r['render_s']} | {r['series']:,} | {r['exposition_bytes'] / 2**20:.1f} "
        f"| {r['with_rpo']:,} of {r['partitions']:,} | {r['state']} |"
        for i, r in enumerate(m["rounds"])
    ]

    def timing(name: str, what: str) -> str:
        t = m[name]
        codes = ", ".join(map(str, t["codes"]))
        return f"| {what} | {t['requests']} | {t['p50_s']} | {t['p99_s']} | {t['max_s']} | {codes} |"

    return [
        "## Monitoring service (Prometheus scrape, status under a frozen cluster)",
        "",
        f"Command: `{m['command']}`.",
        "",
        f"One flow of {m['partitions']:,} partitions ({m['topics']} topics), copied once (available-now, "
        f"{m['replicate_s']} s), then one record more on every partition, so that every partition is behind and its "
        "oldest record is read for the RPO. A round of the monitor (srm.service.monitor) observes the flow (Kafka and "
        "the warehouse) and renders the Prometheus exposition once; a scrape serves those bytes. Then the app under "
        "uvicorn on loopback: requests over HTTP, 6 at a time, with the target answering and with its broker frozen "
        "(SIGSTOP) as a partitioned data centre looks. Before this service, six concurrent `/v2/replications` took "
        "60.1 s each with a frozen target (issue 48).",
        "",
        "| round | observe (s) | render (s) | series | exposition (MiB) | partitions with their RPO read | state |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "| requests | n | p50 (s) | p99 (s) | max (s) | status codes |",
        "|---|---|---|---|---|---|",
        timing("scrape", "`GET /metrics` (Prometheus scrape)"),
        timing("replications", "`GET /v2/replications`"),
        timing("replications_frozen", "`GET /v2/replications`, target frozen"),
        timing("frozen_scrape", "`GET /metrics`, target frozen"),
        "",
        f"The frozen-target requests were spread over 40 s (the monitor probes every 10 s, each probe waits 5 s). "
        f"The monitor found the target unreachable {m['frozen_named_unreachable_after_s']} s after the freeze "
        "(to the second of its `since`): "
        f"{'; '.join(c['reason'] for c in m['frozen_clusters']) or 'not within 60 s'}.",
        "",
    ]


TOOLS = ("mirrormaker2", "ours")


def at_floor(figures: dict[str, Any]) -> bool:
    """The copy's time is only bounded: every record arrived between two polls (see bench.watch)."""
    copy_s = figures.get("copy_seconds")
    return copy_s is not None and (bool(figures.get("within_one_poll")) or copy_s <= POLL_S)


def rate(figures: dict[str, Any]) -> str:
    return f"≥ {num(figures['copy_records_per_s'])}" if at_floor(figures) else num(figures["copy_records_per_s"])


def num(value: float | None) -> str:
    return f"{value:,}" if value else "did not finish"


def first_record(run: dict[str, Any]) -> str:
    value = run.get("first_record_after_s")
    return "-" if value is None else f"{value} s"


def secs(value: float | None) -> str:
    return f"{value} s" if value is not None else "not within 120 s"


def profile(p: dict[str, Any]) -> list[str]:
    lines = [
        f"## Profile of the copy tasks ({p['records']:,} records of {p['record_size']} B, {p['partitions']} "
        "partitions, exactly once)",
        "",
        f"Command: `{p['command']}`: PySpark's Python worker profiler (`spark.python.profile`, cProfile)",
        f"around the copy tasks; {p['profiled_seconds']} s profiled in the tasks. cProfile slows Python calls",
        "down, so the shares matter, not the profiled rate.",
        "",
        "| where the copy tasks' time goes | share |",
        "|---|---|",
        *(f"| {name} | {share:.0%} |" for name, share in p["shares"].items()),
        "",
        "| function (own time) | calls | own s | cumulative s |",
        "|---|---|---|---|",
        *(f"| `{row['function']}` | {row['calls']:,} | {row['own_s']} | {row['cumulative_s']} |" for row in p["top"]),
        "",
        "Reading it: a copied record costs its share of a `consume` call, one `produce` call into librdkafka,",
        "one pass through our loop (`copier._copy_records`; `copier._handle` only splits what `consume`",
        "returned into runs of one partition) and one delivery report (`writer._reporter`'s `delivered`,",
        "which the exact source -> target offset mapping needs). The bookkeeping that used to run per record",
        "(latency statistics, offset runs, counters, the partition's state and target) is done per run of",
        "records. Outside cProfile the delivery report is a small share of a record's CPU (the lab notes,",
        "docs/benchmarks/lab-notes.md, have the producer measured alone).",
        "",
    ]
    return lines


def cluster(c: dict[str, Any]) -> list[str]:
    first = c["rows"][0]
    lines = [
        f"## Spark cluster ({first['records']:,} records of {first['record_size']} B, "
        f"{first['partitions']} partitions, tasks.max {first['tasks_max']}, exactly once)",
        "",
        f"Command: `{c['command']}`. The same available-now copy on `local[*, 4]` and on a Spark standalone",
        "cluster (a master and 1 or 2 workers of 2 cores each, from pyspark's own `spark-class`, on this",
        "machine, workers that cannot see the checkout): the executors get the project in the shipped archive.",
        "",
        "| master | workers | records/s (job) | MB/s (job) | job s | vs local | first record on the target after | "
        "records/s while copying |",
        "|---|---|---|---|---|---|---|---|",
        *(
            f"| {'local[*, 4]' if 'workers' not in row else 'standalone'} | {row.get('workers', '-')} | "
            f"{row['job_records_per_s']:,} | {row['job_mb_per_s']} | {row['job_seconds']} | {row['vs_local']} | "
            f"{row['first_record_after_s']} s | {row['copy_records_per_s']:,} |"
            for row in c["rows"]
        ),
        "",
        "All on one 2-core machine: the cluster adds executor JVMs, the application's registration and the",
        "executors' start-up (the first record arrives later), and spreads the same two cores; once copying, the",
        "cluster's rate is that of `local[*, 4]`. This measures what running distributed costs, not a",
        "speed-up, which needs workers on machines of their own. Peak memory in `results.json` is the",
        "driver's process tree only: the executors are children of the workers.",
        *([f"Measured: {c['measured']}."] if c.get("measured") else []),
        "",
    ]
    return lines


def _endpoint_table(r: dict[str, Any]) -> list[str]:
    before = r.get("before_rollup", {}).get("p95_ms", {})
    extra = " p95 ms before the rollup |" if before else ""
    return [
        f"| endpoint | requests | p50 ms | p95 ms | max ms |{extra}",
        f"|---|---|---|---|---|{'---|' if before else ''}",
        *(
            f"| {e['endpoint']} | {e['requests']} | {e['p50_ms']} | {e['p95_ms']} | {e['max_ms']} |"
            + (f" {before.get(e['endpoint'], '')} |" if before else "")
            for e in r["endpoints"]
        ),
    ]


def rest(r: dict[str, Any]) -> list[str]:
    before = r.get("before_rollup")
    done = f"({r['write_seconds']} s)."
    if "rollup_seconds" in r:
        files = {t: " -> ".join(map(str, counts)) for t, counts in r["files"].items()}
        done = (
            f"({r['write_seconds']} s), then what the flow's maintenance DAG does (its `metrics_rollup` task): the\n"
            f"hourly rollup of every settled hour ({r['rolled_hours']} hours into {r['hourly_rows']:,} rows of\n"
            f"`replication_metrics_hourly`, {r['rollup_seconds']} s), OPTIMIZE and VACUUM of the tables "
            f"({r['optimize_vacuum_seconds']} s; files of\n`replication_metrics` {files['replication_metrics']}, "
            f"of the hourly table {files['replication_metrics_hourly']})."
        )
    return [
        f"## REST metric endpoints ({r['rows_in_warehouse']:,} rows: {r['topics']} topics x {r['days']} days of "
        "one-minute metrics)",
        "",
        f"Command: `{r['command']}`. One flow's `replication_metrics` table written as one Delta append per day",
        *done.split("\n"),
        "Then each endpoint called in-process (FastAPI's TestClient: routing, the Delta",
        "scans with the flow, topic and window pushed down, sampling, JSON), a different topic each call. The",
        "tables stay open between requests (only new commits are read).",
        *([f"Measured: {r['measured']}."] if r.get("measured") else []),
        "",
        *_endpoint_table(r),
        "",
        "Windows whose samples span an hour or more (the 7-day and whole-month ones) are served in whole hours:",
        "the hours before the flow's rollup watermark from the hourly table (one row per partition and hour),",
        "the last ones (within the grace period, not rolled up yet) from the raw table, with the same figures",
        "as the raw table gives. Shorter samples read the raw table: compaction keeps its files in time order",
        "with row groups of 64 Ki rows, so a window's scan still skips what lies outside it.",
        *([f"Last column: {before['code']}, the same command on the same machine."] if before else []),
        "",
    ]


def render(results: dict[str, Any]) -> str:
    sections = header(results)
    if results.get("findings"):
        sections += ["## Findings", "", *results["findings"], ""]
    for key, part in (
        ("throughput", throughput),
        ("latency", latency),
        ("failover", failover),
        ("scale", scale),
        ("checkpoints", checkpoints),
        ("profile", profile),
        ("cluster", cluster),
        ("rest", rest),
        ("monitoring", monitoring),
    ):
        if key in results:
            lines = part(results[key])
            if results[key].get("again"):  # bench.run --only
                lines[2:2] = [
                    f"Measured again {results[key]['finished']}, apart from the run above (`bench.run --only {key}`).",
                    "",
                ]
            sections += lines
    return "\n".join(sections)


def endurance(folder: Path) -> str:
    """The soak (``bench.soak --out``: its SOAK.md) and the history's size per partition and hour
    (``bench.history_size``'s JSON in history_size.json), both run by hand: not part of ``make bench``."""
    soak = folder / "SOAK.md"
    lines = [
        "## Endurance",
        "",
        "A continuous flow for hours under a schedule of faults, checked record by record, with memory, history",
        "bytes, checkpoint passes and latency sampled every minute (`bench.soak`, run by hand; `make test-bench`",
        "runs a 4-minute one).",
        "",
    ]
    if soak.exists():
        lines.append("#" + soak.read_text().strip())  # its "## Endurance: ..." one level down
        lines.append("")
    sizes = folder / "history_size.json"
    if sizes.exists():
        found = json.loads(sizes.read_text())
        lines += [
            "### The sync history's size per partition and hour",
            "",
            f"`{found.get('command', 'python -m bench.history_size')}`: ours in continuous mode with its defaults,",
            "100 B records; every transaction ends a run on each partition it touched, so the history follows",
            "the transactions, not the records. The prune keeps these figures times the source's retention.",
            "",
            "| records/s | partitions | transactions/s | bytes / partition / h | runs / partition / h | p99 (ms) |",
            "|---|---|---|---|---|---|",
        ]
        for r in found["rows"]:
            lines.append(
                f"| {r['rate']:,} | {r['partitions']} | {r['transactions_per_s']:,} | "
                f"{r['bytes_per_partition_hour']:,} | {r['runs_per_partition_hour']:,} | {r['p99_ms']} |"
            )
        lines.append("")
    return "\n".join(lines)


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


def write(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    if "throughput" in results and "latency" in results:
        plot(results, out / PLOT)
    if "scale" in results:
        plot_scale(results["scale"], out / SCALE_PLOT)
    (out / "REPORT.md").write_text(render(results) + "\n" + endurance(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="a results.json written by bench.run")
    args = parser.parse_args()
    write(json.loads(args.results.read_text()), args.results.parent)


if __name__ == "__main__":
    main()
