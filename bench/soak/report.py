"""The soak's report section: what was checked, each fault, and each sampled series over time with
its slope per hour (least squares over the samples after the first 10 minutes)."""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any

from bench.soak.samples import SERIES

SETTLED_MIN = 10.0  # the series' slopes and bounds count from here: warm-up before
RSS_PERCENT_PER_HOUR = 5.0  # issue 45: every process tree's RSS within +-5% per hour
PASS_GROWTH = 1.2  # the checkpoint pass at the end within 1.2x of its value at 10 minutes
RECOVERY_S = 60.0  # new records on the target within 60 s of a fault's end
WINDOW_MIN = 10.0  # "at 10 minutes" and "at the end": the means of 10-minute windows
# The history once retention applies, judged as the checkpoint pass is: the mean of its last 20
# minutes against the mean of its first 20. It is a sawtooth: the source's brokers delete segments
# every log.retention.check.interval.ms (5 minutes), the prune runs every 5 minutes, and between
# the two the history climbs by a quarter at the soak's retention; a slope over an hour or so reads
# the phase at which the samples end (+-25% an hour either way on a flat history), 20-minute means
# do not.
HISTORY_WINDOW_MIN = 20.0
RETENTION_CHECK_MIN = 5.0  # the brokers' log.retention.check.interval.ms
HISTORY_GROWTH = 1.1
# The faults that start a process tree again: its RSS is judged per lifetime, each from 10 minutes
# after its start (a slope over the whole run would let the restarts hide a climb between them).
RESTARTS = {
    "job_rss_mb": ("kill_driver", "tasks_max"),
    "source_broker_rss_mb": ("restart_source",),
    "target_broker_rss_mb": ("restart_target",),
}
LIFETIME_MIN = 15.0  # a lifetime's slope needs this many settled minutes
# The pass's duration per 1,000 group positions: the groups commit on every partition, so the faults
# that add partitions and a topic add work to every pass (64 -> 76 partitions: 12,800 -> 15,200
# positions); growth with run time shows in this one.
PER_POSITION = "checkpoint_pass_s_per_1k_positions"
PASS_SERIES = {PER_POSITION: "checkpoint pass: seconds per 1,000 group positions"}


def slope_per_hour(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(slope per hour, mean) of (minute, value) points; None with fewer than 3."""
    if len(points) < 3:
        return None
    xs, ys = [m / 60 for m, _ in points], [v for _, v in points]
    fit = statistics.linear_regression(xs, ys)
    return fit.slope, statistics.fmean(ys)


def troughs(points: list[tuple[float, float]], every_min: float) -> list[tuple[float, float]]:
    """The lowest of ``points`` in each ``every_min`` window: what a history holds after each prune.

    Between two prunes the history climbs by what the copy adds (a quarter of it at the soak's
    retention); a slope through the climbs reads where the minute samples happen to end, while the
    values after each prune show whether what it keeps grows."""
    if not points or every_min <= 0:
        return points
    first = points[0][0]
    lowest: dict[int, tuple[float, float]] = {}
    for minute, value in points:
        window = int((minute - first) // every_min)
        if window not in lowest or value < lowest[window][1]:
            lowest[window] = (minute, value)
    return [lowest[w] for w in sorted(lowest)]


def history_share(samples: list[dict[str, Any]]) -> tuple[str, Any]:
    """How the history's size is judged: (what per, the factor of a sample's value).

    Every partition has its own runs, so the faults that add partitions and topics add history: a
    new partition's fills up until the source's retention deletes from it too. When the samples
    count the rows of the partitions older than that (settled), the history is judged per settled
    partition (its bytes by their share of the rows); else per source partition."""
    counted = ("settled_partitions", "settled_rows", "history_rows")
    if samples and all(all(s.get(k) for k in counted) for s in samples):
        per = " per settled source partition"
        return per, lambda s: s["settled_rows"] / s["history_rows"] / s["settled_partitions"]
    if samples and all(s.get("source_partitions") for s in samples):
        return " per source partition", lambda s: 1 / s["source_partitions"]
    return "", lambda s: 1.0


def series(samples: list[dict[str, Any]], name: str, after: float = SETTLED_MIN) -> list[tuple[float, float]]:
    return [(s["minute"], float(s[name])) for s in samples if s["minute"] >= after and s.get(name) is not None]


def slopes(samples: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    out = {}
    for name in SERIES:
        fit = slope_per_hour(series(samples, name))
        if fit is not None:
            slope, mean = fit
            out[name] = {
                "per_hour": round(slope, 3),
                "mean": round(mean, 3),
                "percent_per_hour": round(100 * slope / mean, 2) if mean else 0.0,
            }
    return out


def _figure(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.3f}"


def _mean_between(points: list[tuple[float, float]], first: float, last: float) -> float | None:
    values = [v for m, v in points if first <= m < last]
    return statistics.fmean(values) if values else None


def _window_mean(samples: list[dict[str, Any]], name: str, first: float, last: float) -> float | None:
    values = [v for m, v in series(samples, name, after=0.0) if first <= m < last]
    return statistics.fmean(values) if values else None


def lifetime_slopes(samples: list[dict[str, Any]], name: str, restarts: list[float]) -> list[float]:
    """The slope per hour, in % of the mean, of ``name`` in each lifetime of its process tree (the
    run cut at the ``restarts``' minutes) with LIFETIME_MIN settled minutes."""
    out = []
    bounds = [0.0, *sorted(restarts), float("inf")]
    for start, end in itertools.pairwise(bounds):
        points = [(m, v) for m, v in series(samples, name, after=start + SETTLED_MIN) if m < end]
        if points and points[-1][0] - points[0][0] >= LIFETIME_MIN:
            fit = slope_per_hour(points)
            if fit is not None and fit[1]:
                out.append(round(100 * fit[0] / fit[1], 1))
    return out


def settled_minute(options: dict[str, Any]) -> float:
    """From when the history is judged: the source's retention applied and a prune after it."""
    return float(options["retention_minutes"]) + float(options["prune_s"]) / 60 + WINDOW_MIN


def criteria(result: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """What issue 45 asks of the soak: (criterion, measured, met)."""
    samples, faults, o = result["samples"], result["faults"], result["options"]
    out = []
    kinds = {f["kind"] for f in faults}
    out.append(
        (
            "at least 24 faults of at least 8 kinds",
            f"{len(faults)} of {len(kinds)} kinds",
            len(faults) >= 24 and len(kinds) >= 8,
        )
    )
    out.append(
        (
            "0 lost, 0 duplicated, order kept",
            f"{result['lost']} lost, {result['duplicated']} duplicated",
            result["lost"] == 0 and result["duplicated"] == 0,
        )
    )
    slow = [f for f in faults if f["recovered_s"] is None or f["recovered_s"] > RECOVERY_S]
    worst = max((f["recovered_s"] for f in faults if f["recovered_s"] is not None), default=0.0)
    out.append(
        (
            f"new records on the target within {RECOVERY_S:.0f} s of every fault's end",
            f"slowest {worst:.1f} s; {len(slow)} later or never",
            not slow,
        )
    )
    f = result["failover"]
    out.append(
        (
            "every group fails over with 0 re-read and 0 skipped",
            _failover(f),
            "error" not in f and f.get("re_read") == 0 and f.get("skipped") == 0,
        )
    )
    for name, resets in RESTARTS.items():
        percents = lifetime_slopes(samples, name, [f["at_s"] / 60 for f in faults if f["kind"] in resets])
        if percents:
            worst = max(percents, key=abs)
            out.append(
                (
                    f"{SERIES[name][0]} within +-{RSS_PERCENT_PER_HOUR:.0f}% per hour (each lifetime)",
                    f"{', '.join(f'{p:+.1f}' for p in percents)}% per hour",
                    abs(worst) <= RSS_PERCENT_PER_HOUR,
                )
            )
    settled = settled_minute(o)
    later = [s for s in samples if s["minute"] >= settled]
    unit, share = history_share(later)
    last = max((s["minute"] for s in later), default=settled)
    for name in ("history_topic_mb", "history_table_mb", "history_rows"):
        points = [(s["minute"], s[name] * share(s)) for s in later if s.get(name) is not None]
        early = _mean_between(points, settled, settled + HISTORY_WINDOW_MIN)
        late = _mean_between(points, last - HISTORY_WINDOW_MIN, last + 1)
        if not early or late is None:
            continue
        fit = slope_per_hour(troughs(points, o["prune_s"] / 60))
        trend = f"; the least after each prune: {100 * fit[0] / fit[1]:+.1f}% per hour" if fit and fit[1] else ""
        out.append(
            (
                f"{SERIES[name][0]}{unit}: stops growing once retention applies (the last "
                f"{HISTORY_WINDOW_MIN:.0f} minutes within {HISTORY_GROWTH}x of minutes "
                f"{settled:.0f}-{settled + HISTORY_WINDOW_MIN:.0f})",
                f"{_figure(early)} -> {_figure(late)} ({late / early:.2f}x){trend}",
                late <= HISTORY_GROWTH * early,
            )
        )
    spans = [s["history_span_min"] for s in later if s.get("history_span_min") is not None]
    if spans:
        # What the prune keeps reaches back to the log start; the brokers delete a segment at their
        # retention check (log.retention.check.interval.ms, 5 minutes) and the prune follows within prune_s.
        bound = o["retention_minutes"] + o["prune_s"] / 60 + RETENTION_CHECK_MIN
        out.append(
            (
                f"how far back the history of the settled partitions reaches: at most the source's retention, a "
                f"prune and a retention check ({bound:.0f} minutes), after minute {settled:.0f}",
                f"{min(spans):.1f}-{max(spans):.1f} minutes",
                max(spans) <= bound,
            )
        )
    end = max((s["minute"] for s in samples), default=0.0)
    first = f"minutes {SETTLED_MIN:.0f}-{SETTLED_MIN + WINDOW_MIN:.0f}"
    per_position = [
        {"minute": s["minute"], PER_POSITION: 1000 * s["checkpoint_pass_s"] / s["checkpoint_positions"]}
        for s in samples
        if s.get("checkpoint_pass_s") is not None and s.get("checkpoint_positions")
    ]
    for name, values in (
        ("checkpoint_pass_s", samples),
        (PER_POSITION, per_position),
        ("checkpoint_peak_pss_mb", samples),
    ):
        early = _window_mean(values, name, SETTLED_MIN, SETTLED_MIN + WINDOW_MIN)
        late = _window_mean(values, name, end - WINDOW_MIN, end + 1)
        if early and late is not None:
            out.append(
                (
                    f"{PASS_SERIES.get(name) or SERIES[name][0]}: the last {WINDOW_MIN:.0f} minutes within "
                    f"{PASS_GROWTH}x of {first}",
                    f"{early:,.2f} -> {late:,.2f} ({late / early:.2f}x)",
                    late <= PASS_GROWTH * early,
                )
            )
    out.append(
        (
            "history holds nothing below the source's log start",
            str(result["history_pruned"]),
            bool(result["history_pruned"]),
        )
    )
    return out


def _setting(options: dict[str, Any], name: str) -> str:
    """A flow setting the soak was given, or "the default" when it left the flow's own."""
    value = options.get(name)
    return "the default" if value is None else f"{value}"


def section(result: dict[str, Any], command: str, plot: str | None) -> str:
    o = result["options"]
    lines = [
        "## Endurance: a soak under faults",
        "",
        f"`{command}`",
        "",
        f"{o['minutes']:.0f} minutes of one continuous flow at {o['rate']:,} records/s of 100 B over {o['partitions']} "
        f"partitions ({o['topics']} topics, `retention.ms` {o['retention_minutes']:.0f} min on the source), "
        f"{o['groups']} consumer groups at different lags, {len(result['faults'])} faults; "
        f"`transaction.linger.ms` {_setting(o, 'linger_ms')}, `transaction.interval.ms` {_setting(o, 'interval_ms')}.",
        "",
        "| check | result |",
        "|---|---|",
        f"| records on the target (of {result['sent']:,} sent) | {result['records']:,} |",
        f"| lost / duplicated | {result['lost']} / {result['duplicated']} |",
        f"| history holds nothing below the source's log start | {result['history_pruned']} |",
        f"| failover of every group: re-read / skipped | {_failover(result['failover'])} |",
        f"| job runs (the supervisor restarts it) | {result['job_starts']} |",
        "",
        "| criterion (issue 45) | measured | met |",
        "|---|---|---|",
        *(f"| {c} | {m} | {'yes' if ok else '**no**'} |" for c, m, ok in criteria(result)),
    ]
    lines += history_rate(result)
    lines += [
        "",
        "| # | fault | at (min) | took (s) | new records on the target after its end (s) | what |",
        "|---|---|---|---|---|---|",
    ]
    for i, f in enumerate(result["faults"], 1):
        recovered = "never" if f["recovered_s"] is None else f"{f['recovered_s']:.1f}"
        lines.append(
            f"| {i} | {f['kind']} | {f['at_s'] / 60:.1f} | {f['duration_s']:.1f} | {recovered} | {f['detail']} |"
        )
    lines += [
        "",
        f"After the first {SETTLED_MIN:.0f} minutes (least squares over the minute samples):",
        "",
        "| series | first | last | mean | slope per hour | % of the mean per hour |",
        "|---|---|---|---|---|---|",
    ]
    for name, fit in result.get("slopes", {}).items():
        points = series(result["samples"], name)
        label, unit = SERIES[name]
        lines.append(
            f"| {label} ({unit}) | {points[0][1]:,.1f} | {points[-1][1]:,.1f} | {fit['mean']:,.1f} | "
            f"{fit['per_hour']:+,.2f} | {fit['percent_per_hour']:+.1f}% |"
        )
    lines += pass_steps(result)
    if plot:
        lines += ["", f"![soak series]({plot})"]
    return "\n".join(lines) + "\n"


def history_rate(result: dict[str, Any]) -> list[str]:
    """What the history's size per settled partition is made of: the runs its reach holds per minute
    (every transaction ends a run on each partition it touched, so this is the commit rate a
    partition sees) times the minutes it reaches back. In the windows the history's bound compares,
    and its range once retention applies; [] when the samples do not count settled rows."""
    settled = settled_minute(result["options"])
    points = [
        (s["minute"], s["settled_rows"] / s["settled_partitions"] / s["history_span_min"])
        for s in result["samples"]
        if s["minute"] >= settled
        and s.get("settled_rows")
        and s.get("settled_partitions")
        and s.get("history_span_min")
    ]
    if not points:
        return []
    last = points[-1][0]
    early = _mean_between(points, settled, settled + HISTORY_WINDOW_MIN)
    late = _mean_between(points, last - HISTORY_WINDOW_MIN, last + 1)
    if not early or late is None:
        return []
    values = [v for _, v in points]
    return [
        "",
        "The history's rows per settled partition are the runs its reach holds per minute (each transaction "
        "ends a run on every partition it touched: the commit rate a partition sees) times the minutes it "
        f"reaches back. Runs per partition per minute of reach: {early:,.0f} in minutes {settled:.0f}-"
        f"{settled + HISTORY_WINDOW_MIN:.0f}, {late:,.0f} in the last {HISTORY_WINDOW_MIN:.0f} minutes "
        f"({late / early:.2f}x), {min(values):,.0f}-{max(values):,.0f} after minute {settled:.0f}.",
    ]


def pass_steps(result: dict[str, Any]) -> list[str]:
    """The checkpoint pass step by step: each step's mean seconds in the first settled window and in
    the last one, so a pass that slows down says where."""
    passes = [p for p in result.get("passes", []) if p.get("steps")]
    if not passes:
        return []
    end = max((s["minute"] for s in result["samples"]), default=0.0)  # as criteria() takes it
    windows = ((SETTLED_MIN, SETTLED_MIN + WINDOW_MIN), (end - WINDOW_MIN, end + 1))
    chosen = [[p for p in passes if first <= p["at_s"] / 60 < last] for first, last in windows]
    names = list(dict.fromkeys(name for p in passes for name in p["steps"]))
    lines = [
        "",
        f"The checkpoint pass step by step (mean seconds of the passes in minutes {SETTLED_MIN:.0f}-"
        f"{SETTLED_MIN + WINDOW_MIN:.0f} and in the last {WINDOW_MIN:.0f} minutes):",
        "",
        "| step | "
        + " | ".join(
            f"{first:.0f}-{last:.0f} min ({len(c)} pass{'' if len(c) == 1 else 'es'})"
            for (first, last), c in zip(windows, chosen, strict=True)
        )
        + " |",
        "|---|---|---|",
    ]
    for name in names:
        means = [f"{sum(p['steps'].get(name, 0.0) for p in c) / len(c):.2f}" if c else "-" for c in chosen]
        lines.append(f"| {name} | " + " | ".join(means) + " |")
    cpu = [[p["cpu_s"] for p in c if p.get("cpu_s") is not None] for c in chosen]
    if any(cpu):  # the pass's work apart from its waits (for the brokers, for a core of a busy machine)
        means = [f"{sum(c) / len(c):.2f}" if c else "-" for c in cpu]
        lines.append("| CPU of the pass's process (all steps) | " + " | ".join(means) + " |")
    return lines


def _failover(f: dict[str, Any]) -> str:
    if "error" in f:
        return f"failed: {f['error'][:200]}"
    took = f"; srm-control failover took {f['seconds']:.0f} s" if f.get("seconds") is not None else ""
    return f"{f.get('re_read')} / {f.get('skipped')} ({f.get('groups')} groups, {f.get('partitions')} positions{took})"


def plot(samples: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [n for n in SERIES if any(s.get(n) is not None for s in samples)]
    columns = 3
    rows = (len(names) + columns - 1) // columns
    figure, axes = plt.subplots(rows, columns, figsize=(15, 3.2 * rows), squeeze=False)
    for ax, name in zip(axes.flat, names, strict=False):
        points = series(samples, name, after=0.0)
        ax.plot([m for m, _ in points], [v for _, v in points], marker=".", linewidth=1)
        label, unit = SERIES[name]
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("minutes")
        ax.set_ylabel(unit)
        ax.axvline(SETTLED_MIN, color="grey", linewidth=0.5, linestyle=":")
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
