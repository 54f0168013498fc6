"""The soak's report section: what was checked, each fault, and each sampled series over time with
its slope per hour (least squares over the samples after the first 10 minutes)."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from bench.soak.samples import SERIES

SETTLED_MIN = 10.0  # the series' slopes and bounds count from here: warm-up before


def slope_per_hour(points: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(slope per hour, mean) of (minute, value) points; None with fewer than 3."""
    if len(points) < 3:
        return None
    xs, ys = [m / 60 for m, _ in points], [v for _, v in points]
    fit = statistics.linear_regression(xs, ys)
    return fit.slope, statistics.fmean(ys)


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


def section(result: dict[str, Any], command: str, plot: str | None) -> str:
    o = result["options"]
    lines = [
        "## Endurance: a soak under faults",
        "",
        f"`{command}`",
        "",
        f"{o['minutes']:.0f} minutes of one continuous flow at {o['rate']:,} records/s of 100 B over {o['partitions']} "
        f"partitions ({o['topics']} topics, `retention.ms` {o['retention_minutes']:.0f} min on the source), "
        f"{o['groups']} consumer groups at different lags, {len(result['faults'])} faults.",
        "",
        "| check | result |",
        "|---|---|",
        f"| records on the target (of {result['sent']:,} sent) | {result['records']:,} |",
        f"| lost / duplicated | {result['lost']} / {result['duplicated']} |",
        f"| history holds nothing below the source's log start | {result['history_pruned']} |",
        f"| failover of every group: re-read / skipped | {_failover(result['failover'])} |",
        f"| job runs (the supervisor restarts it) | {result['job_starts']} |",
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
    if plot:
        lines += ["", f"![soak series]({plot})"]
    return "\n".join(lines) + "\n"


def _failover(f: dict[str, Any]) -> str:
    if "error" in f:
        return f"failed: {f['error'][:200]}"
    return f"{f.get('re_read')} / {f.get('skipped')} ({f.get('groups')} groups, {f.get('partitions')} positions)"


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
