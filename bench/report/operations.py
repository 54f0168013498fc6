"""The report's sections on what operators do: failover accuracy, checkpoint passes at scale, the
monitoring service under a fault and the REST metrics' response times."""

from __future__ import annotations

from typing import Any


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
        *steps(c.get("pass_steps"), c.get("pass_cpu_seconds")),
    ]


def steps(found: dict[str, float] | None, cpu: float | None = None) -> list[str]:
    """Where the pass's time went, step by step (its log line), when the run recorded it."""
    if not found:
        return []
    told = ", ".join(f"{name} {seconds}" for name, seconds in found.items())
    used = "" if cpu is None else f"; its process used {cpu} s of CPU in all"
    return [f"The pass, step by step (s): {told}{used}.", ""]


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
