"""The report's scale sections: topics and partitions (both tools), where the time goes (the profile),
and a Spark standalone cluster against local mode."""

from __future__ import annotations

from typing import Any

from bench.report.plots import SCALE_PLOT

TOOLS = ("mirrormaker2", "ours")


POLL_S = 0.1  # bench.watch.POLL_S (not imported: rendering needs no Kafka client)


def scale(sc: dict[str, Any]) -> list[str]:
    lines = [
        "## Scale",
        "",
        f"Command: `{sc['command']}`.",
        "",
        "Partitions: one topic of 1 KiB records; MM2 `tasks.max` = partitions up to 8, ours 2 tasks (available-now);",
        "records/s timed as in the throughput section.",
        *repeats(sc["partitions"]),
        "",
        "| partitions | records | MirrorMaker 2 | ours, exactly once | ours / MM2 |",
        "|---|---|---|---|---|",
    ]
    for row in sc["partitions"]:
        lines.append(
            f"| {row['partitions']} | {row['records']:,} | {rate(row['mirrormaker2'])} "
            f"| {rate(row['ours'])} | {scale_ratio(row) or '-'} |"
        )
    lines += [
        "",
        "Topics: T topics of one partition with small records (100 B), both in continuous mode on a pattern",
        "(MM2 `tasks.max` = min(T, 8), `refresh.topics.interval.seconds` = 5 instead of its default 600,",
        "which alone would decide the last column); the first record on the target, seconds after the",
        "replicator was started; then a new topic matching the pattern is created with one record: seconds",
        "until that record is on the target (in brackets, where measured: from the record's write, its",
        "acknowledgement by the source, on).",
        *repeats(sc["topics"]),
        "",
        "| topics | records | MM2 records/s | ours records/s | ours / MM2 | first record: MM2 | ours "
        "| new topic -> first record: MM2 | ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in sc["topics"]:
        theirs, ours = row["mirrormaker2"], row["ours"]
        lines.append(
            f"| {row['topics']} | {ours['records']:,} | {rate(theirs)} | {rate(ours)} "
            f"| {scale_ratio(row) or '-'} | {first_record(theirs)} "
            f"| {first_record(ours)} | {new_topic(theirs)} | {new_topic(ours)} |"
        )
    if any(at_floor(row[tool]) for part in ("partitions", "topics") for row in sc[part] for tool in TOOLS):
        lines += [
            "",
            "≥: every record arrived between two polls of the target (0.1 s apart, more when a poll of many "
            "partitions is slow): the figure is the records over that span, a lower bound, not a rate; "
            "a ratio with ≥ or ≤ is bounded so too, one without a figure has no bound.",
        ]
    idle = sc.get("idle")
    if idle:
        theirs, ours = idle["mirrormaker2"], idle["ours"]
        again = (
            f"Measured again {idle['finished']} (`{idle['command']}`), apart from the run above. "
            if "command" in idle
            else ""
        )
        lines += [
            "",
            f"Idle: {again}{'Both' if again else 'both'} holding {idle['topics']:,} empty topics in continuous mode;",
            "CPU seconds per minute of each one's process tree (PySpark's Python workers included) over",
            f"{ours['window_s']:.0f} s, from a minute after every remote topic existed{idle_runs(idle)}.",
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


def repeats(rows: list[dict[str, Any]]) -> list[str]:
    """How many runs each row's figures are the medians of (bench.scale.median_run), if more than one."""
    counts = sorted({len(row[tool]["runs"]) for row in rows for tool in TOOLS if "runs" in row[tool]})
    if not counts:
        return []
    runs = " or ".join(str(n) for n in counts)
    return [
        f"Each figure is the median of {runs} runs of each tool, the tools taking turns to go first (every run",
        "is in `results.json`); the records/s is the run of the median rate's.",
    ]


def idle_runs(idle: dict[str, Any]) -> str:
    """The idle figures' runs (bench.scale.median_run by CPU a minute), if more than one: each
    tool's, and which is the median."""
    if "runs" not in idle["ours"]:
        return ""
    each = "; ".join(
        f"{name} {' / '.join(str(r['cpu_seconds_per_minute']) for r in idle[tool]['runs'])}"
        for tool, name in zip(TOOLS, ("MirrorMaker 2", "ours"), strict=True)
    )
    return f"; the median of {len(idle['ours']['runs'])} runs of each tool, taking turns to go first ({each})"


def scale_ratio(row: dict[str, Any]) -> str | None:
    """Ours / MM2's copy rate of a scale row. A copy that passed within one poll (:func:`at_floor`) has
    only a lower bound for its rate, so the ratio is a bound too: at least, when only ours is bounded; at
    most, when only MM2's is; None when both are."""
    ours, theirs = (at_floor(row[tool]) for tool in ("ours", "mirrormaker2"))
    if ours and theirs:
        return None
    if row["ours_vs_mm2"] is None:
        return None
    return f"{'≥ ' if ours else '≤ ' if theirs else ''}{row['ours_vs_mm2']}"


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


def new_topic(run: dict[str, Any]) -> str:
    """A new topic's first record: from the topic's creation (and from the record's write, when measured)."""
    after_write = run.get("new_topic_after_write_seconds")
    return secs(run["new_topic_seconds"]) + ("" if after_write is None else f" ({after_write} s)")


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
    counts = sorted({row["partitions"] for row in c["rows"]})
    lines = [
        f"## Spark cluster ({first['records']:,} records of {first['record_size']} B, "
        f"{' / '.join(map(str, counts))} partitions, tasks.max {first['tasks_max']}, exactly once)",
        "",
        f"Command: `{c['command']}`. The same available-now copy on `local[*, 4]` and on a Spark standalone",
        "cluster (a master and 1 or 2 workers of 2 cores each, from pyspark's own `spark-class`, on this",
        "machine, workers that cannot see the checkout): the executors get the project in the shipped archive.",
        *cluster_runs(c["rows"]),
        "",
        "| partitions | master | workers | records/s (job) | MB/s (job) | job s | vs local | first record on the "
        "target after | records/s while copying | while copying vs local |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {row['partitions']} | {'local[*, 4]' if 'workers' not in row else 'standalone'} | "
            f"{row.get('workers', '-')} | {row['job_records_per_s']:,} | {row['job_mb_per_s']} | "
            f"{row['job_seconds']} | {row['vs_local']} | {row['first_record_after_s']} s | "
            f"{row['copy_records_per_s']:,} | {row.get('copying_vs_local', '-')} |"
            for row in c["rows"]
        ),
        "",
        "All on one 2-core machine: the cluster adds executor JVMs, the application's registration and the",
        "executors' start-up (the first record arrives later: a cost paid once per job), and spreads the same",
        "two cores; once copying, the cluster's rate is set by those cores as `local[*, 4]`'s is. A job's rate",
        "against local's therefore grows with its records. This measures what running distributed costs, not a",
        "speed-up, which needs workers on machines of their own. Each copy slot's tasks stay on one executor",
        "(Spark's executor locality), where its Python worker and producer are; the executors' JVMs compile",
        "with C1 alone and their Python workers import the archive's bytecode, which shortened the start.",
        "Where a cluster job's start goes: [lab notes](../docs/benchmarks/lab-notes.md#scale). Peak memory",
        "in `results.json` is the driver's process tree only: the executors are children of the workers.",
        *([f"Measured: {c['measured']}."] if c.get("measured") else []),
        "",
    ]
    return lines


def cluster_runs(rows: list[dict[str, Any]]) -> list[str]:
    """How many runs each cluster row is the median of (bench.scale.median_run by the job rate), with every
    run's job rate, if more than one."""
    if not any("runs" in row for row in rows):
        return []
    each = "; ".join(
        f"{row['partitions']} partitions, {row.get('workers', 'local')}"
        f"{' worker(s)' if 'workers' in row else ''}: "
        + " / ".join(f"{r['job_records_per_s']:,}" for r in row.get("runs", [row]))
        for row in rows
    )
    return [
        f"Each row is the run of the median job rate of {len(rows[0].get('runs', [rows[0]]))}, the masters taking "
        f"turns (records/s of each run: {each}).",
    ]


def aggregation(a: dict[str, Any]) -> list[str]:
    """Many source clusters into one target (bench.aggregation)."""
    rows = [("MirrorMaker 2", a["mirrormaker2"]), ("ours, exactly once", a["ours"])]
    return [
        f"## Aggregation ({a['sources']} source clusters x {a['topics_per_source']} topics into one target)",
        "",
        f"Command: `{a['command']}`. Each source cluster holds the same {a['topics_per_source']} topics of one",
        f"partition, {a['per_topic']:,} records of {a['record_size']} B each, copied in continuous mode from the",
        "start (ours: a flow and a replicate job per source, all at once; MM2: one process with a flow per",
        "source, `tasks.max` = min(topics, 8) each, a 5 s topic refresh); once all are on the target, a second",
        "wave of as many records is written while it runs. Then every remote topic is read whole (committed",
        "records): each record's sequence number once and in order.",
        "",
        "| tool | first record after | records/s (first wave) | second wave, last record after its write | "
        "CPU s | PSS MB at the end | missing | duplicated | out of order |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {name} | {secs(r['first_record_after_s'])} | {rate(r)} | {secs(r['second_wave_after_write_s'])} | "
            f"{r['cpu_seconds']} | {r['pss_mb_at_end']:,} | {r['missing']} | {r['duplicated']} | {r['out_of_order']} |"
            for name, r in rows
        ),
        "",
        f"Ours / MirrorMaker 2 (first wave's records/s): {a['ours_vs_mm2']}.",
        *([f"Measured: {a['measured']}."] if a.get("measured") else []),
        "",
    ]
