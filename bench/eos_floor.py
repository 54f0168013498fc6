"""What exactly-once costs in latency on these brokers: ours, Kafka's textbook pattern and MirrorMaker 2.

    .venv/bin/python -m bench.eos_floor [--rounds 3] [--rate 5000] [--seconds 30] [--partitions 8] [--tools a,b]
    .venv/bin/python -m bench.eos_floor --rates 5000,50000 --seconds 120 --out bench   # issue 45's figures

Each round runs ``bench.latency``'s load (warm-up included) once with each of five tools on the
local clusters (``make kafka-up``; ``--tools`` picks some): ours (exactly once, its defaults), ours
with ``exactly_once: false`` (at least once, as MirrorMaker 2), ``bench.textbook_copier``
(Kafka's own consume-transform-produce in transactions, with nothing of ours: no Spark, no
history, no progress, no ownership), the same copier in Java (``bench/TextbookCopier.java``: Kafka's
own clients, which speak transactions v2, KIP-890 part 2, where librdkafka speaks v1), and
MirrorMaker 2 (at least once, its defaults). Each round starts with the next tool, so no tool
always runs first or last. Prints JSON: each run's p50/p95/p99/max and the records read against
those sent (the textbook copiers' also the transactions they committed), per tool the median of
the rounds, per round ours' p99 over that of the tool of the same guarantee (``p99_ratios``), and
where the tools' logs are kept; each round also records how long the local brokers had been up when
it started (a cold round: brokers fresh from ``make demo``), and each run when it started. Whichever
tool runs first on brokers just started meets them compiling their hot code (1.5-1.7 of this
machine's two cores for their first 7-20 s) and the next tool meets them warm: ``--cold``
restarts the local brokers before each tool's run of the first round, so that every tool's first
run meets brokers as cold as the first run after ``make demo`` does. ``--rates`` measures each rate in turn,
``--out`` writes ``eos_floor.json`` there and renders that folder's ``REPORT.md`` again (its section
"Exactly once against Kafka's transactions alone"). The textbook copiers' figures are what a copier
built on Kafka transactions gets here, in either version of the protocol; MirrorMaker 2 waits for
no commit. Not part of ``make bench``: run by hand.
"""

from __future__ import annotations

import json
import re
import shlex
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from bench import latency, replicators, textbook_copier
from srm.config import load_config
from srm.devenv.local import LocalClusters
from srm.paths import local_dir

FIGURES = ("p50_ms", "p95_ms", "p99_ms", "max_ms")
COUNTS = ("records", "sent")
TEXTBOOK = "textbook_exactly_once"
TEXTBOOK_JAVA = "textbook_exactly_once_java"
AT_LEAST_ONCE = "ours_at_least_once"
# Per round, how ours compares with the tool of the same guarantee: exactly once with the textbook
# copiers (Kafka transactions alone), at least once with MirrorMaker 2.
PAIRS = {
    "ours_vs_textbook": ("ours_exactly_once", TEXTBOOK),
    "ours_vs_textbook_java": ("ours_exactly_once", TEXTBOOK_JAVA),
    "ours_at_least_once_vs_mirrormaker2": (AT_LEAST_ONCE, "mirrormaker2"),
}


FILE = "eos_floor.json"  # what --out writes, and the report reads
TOOL_NAMES = ("ours_exactly_once", TEXTBOOK, TEXTBOOK_JAVA, "mirrormaker2", AT_LEAST_ONCE)


def tools(config_path: Path, workdir: Path, partitions: int) -> dict[str, latency.Start]:
    source, target = latency.clusters(config_path)
    return {
        "ours_exactly_once": latency.start_ours(config_path, workdir),
        TEXTBOOK: lambda topic: replicators.textbook(config_path, workdir, topic, partitions),
        TEXTBOOK_JAVA: lambda topic: replicators.textbook_java(source, target, workdir, topic, partitions),
        "mirrormaker2": latency.start_mirrormaker2(config_path, workdir, partitions),
        # ours with exactly_once: false (an idempotent producer, no transactions): MM2's guarantee
        AT_LEAST_ONCE: lambda topic: replicators.ours(config_path, workdir, topic, exactly_once=False),
    }


def committed(workdir: Path) -> int | None:
    """The transactions the textbook copier that ran last committed, from the line it ends with
    (both copiers end with the same line)."""
    logs = sorted(workdir.glob("textbook-*.log"), key=lambda path: path.stat().st_mtime)
    pattern = re.escape(textbook_copier.DONE_LINE).replace(re.escape("{}"), r"(\d+)")
    found = re.search(pattern, logs[-1].read_text(errors="replace")) if logs else None
    return int(found[1]) if found else None


def measure(
    config_path: Path,
    load: latency.Load,
    rounds: int,
    workdir: Path,
    only: list[str] | None = None,
    *,
    cold: bool = False,
) -> dict[str, Any]:
    """``rounds`` runs of each tool; ``cold``: the local brokers restarted before each run of the first round."""
    source, target = latency.clusters(config_path)
    starts = [(n, s) for n, s in tools(config_path, workdir, load.partitions).items() if not only or n in only]
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in starts}
    uptimes: list[dict[str, float]] = []
    for round_ in range(rounds):
        uptimes.append(brokers_up_s(config_path))
        for name, start in starts[round_ % len(starts) :] + starts[: round_ % len(starts)]:
            if cold and round_ == 0:
                restart_brokers(config_path)
            youngest = max(brokers_started(config_path).values(), default=None)
            began = time.time()
            figures = latency.run_with(start, source, target, load)
            kept = {k: round(figures[k], 1) for k in FIGURES} | {k: figures[k] for k in COUNTS}
            # when the youngest local broker started, and how long it had been up as the run began
            kept["brokers_started"] = youngest
            kept["brokers_up_s"] = None if youngest is None else round(began - youngest, 1)
            if name in (TEXTBOOK, TEXTBOOK_JAVA):
                kept["transactions"] = committed(workdir)
            runs[name].append(kept)
    return dict(load.described()) | {
        "rounds": rounds,
        "median": {name: {k: statistics.median(r[k] for r in rs) for k in FIGURES} for name, rs in runs.items()},
        "runs": runs,
        "p99_ratios": ratios(runs),
        "brokers_up_s": uptimes,
        "cold_rounds": [1] if cold and rounds else [],
        "logs": str(workdir),
    }


def brokers_up_s(config_path: Path) -> dict[str, float]:
    """Per local cluster, how long its broker has been up (seconds), or nothing when it is not ours."""
    now = time.time()
    return {alias: round(now - started, 1) for alias, started in brokers_started(config_path).items()}


def brokers_started(config_path: Path) -> dict[str, float]:
    """Per local cluster, when its broker's process started (Unix time), or nothing when it is not ours."""
    config = load_config(config_path)
    started = {}
    for member in LocalClusters(config.local_clusters(), local_dir()).members:
        pid = member.pid()
        if pid is not None:
            started[member.alias] = psutil.Process(pid).create_time()
    return started


def restart_brokers(config_path: Path) -> None:
    """Stop and start the configuration's local brokers (their data kept); refused when it has none."""
    config = load_config(config_path)
    clusters = LocalClusters(config.local_clusters(), local_dir())
    if len(clusters.members) < len(config.clusters):
        raise SystemExit(f"--cold restarts local brokers: {config_path} names clusters that are not local")
    clusters.down()
    clusters.up()


def ratios(runs: dict[str, list[dict[str, Any]]]) -> dict[str, list[float]]:
    """Per round, ours' p99 over the other tool's of the same guarantee (PAIRS), where both ran."""
    return {
        name: [round(a["p99_ms"] / b["p99_ms"], 2) for a, b in zip(runs[ours], runs[other], strict=True)]
        for name, (ours, other) in PAIRS.items()
        if ours in runs and other in runs
    }


def main() -> None:
    parser = latency.load_arguments(__doc__.split("\n")[0], seconds=30)
    parser.add_argument("--rounds", type=int, default=3, help="runs of each tool (default %(default)s)")
    parser.add_argument("--tools", help="comma-separated, of: " + ", ".join(TOOL_NAMES) + " (default: all)")
    parser.add_argument("--rates", type=latency.numbers, help="comma-separated rates, measured in turn (for --rate)")
    parser.add_argument(
        "--cold",
        action="store_true",
        help="restart the local brokers before each tool's run of the first round (of the first rate)",
    )
    parser.add_argument("--out", type=Path, help="folder for eos_floor.json; its REPORT.md is rendered again")
    args = parser.parse_args()
    only = args.tools.split(",") if args.tools else None
    if only and set(only) - set(TOOL_NAMES):
        parser.error(f"--tools: unknown {sorted(set(only) - set(TOOL_NAMES))}")
    workdir = local_dir() / "eos-floor" / time.strftime("%Y%m%d-%H%M%S")
    workdir.mkdir(parents=True)
    started = time.monotonic()
    figures = [
        measure(
            Path(args.config),
            latency.Load(rate, args.seconds, args.partitions, args.warmup_seconds),
            args.rounds,
            workdir,
            only,
            cold=args.cold and index == 0,
        )
        for index, rate in enumerate(args.rates or [args.rate])
    ]
    result: dict[str, Any] = figures[0] if not args.rates else {"rates": figures}
    if args.out:
        write(
            args.out,
            {
                "command": " ".join([".venv/bin/python -m bench.eos_floor", *map(shlex.quote, sys.argv[1:])]),
                "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "minutes": round((time.monotonic() - started) / 60, 1),
                "rates": figures,
            },
        )
    print(json.dumps(result, indent=2))


def write(out: Path, result: dict[str, Any]) -> None:
    """``eos_floor.json`` in ``out``, and ``out``'s REPORT.md rendered again when it has a results.json."""
    from bench import report

    out.mkdir(parents=True, exist_ok=True)
    (out / FILE).write_text(json.dumps(result, indent=2) + "\n")
    results = out / "results.json"
    if results.exists():
        report.write(json.loads(results.read_text()), out)


if __name__ == "__main__":
    main()
