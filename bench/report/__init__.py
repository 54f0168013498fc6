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

from bench.report.copying import latency, throughput
from bench.report.endurance import endurance
from bench.report.floor import floor
from bench.report.operations import checkpoints, failover, monitoring, rest
from bench.report.plots import PLOT, SCALE_PLOT, plot, plot_scale
from bench.report.scaling import aggregation, cluster, profile, scale


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


def render(results: dict[str, Any]) -> str:
    sections = header(results)
    if results.get("findings"):
        sections += ["## Findings", "", *results["findings"], ""]
    for key, part in (
        ("throughput", throughput),
        ("latency", latency),
        ("failover", failover),
        ("scale", scale),
        ("aggregation", aggregation),
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


def write(results: dict[str, Any], out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    if "throughput" in results and "latency" in results:
        plot(results, out / PLOT)
    if "scale" in results:
        plot_scale(results["scale"], out / SCALE_PLOT)
    (out / "REPORT.md").write_text(render(results) + "\n" + endurance(out) + "\n" + floor(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", type=Path, help="a results.json written by bench.run")
    args = parser.parse_args()
    write(json.loads(args.results.read_text()), args.results.parent)
