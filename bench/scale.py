"""Scale: more partitions, more topics, and how soon a new topic is replicated.

    .venv/bin/python -m bench.scale [--partitions 8,512,2048] [--records 200000] [--topics 1,100,1000,2000] \\
        [--per-topic 100] [--idle-topics 2000] [--repeat 3]

Partitions: one topic of P partitions holding ``--records`` records of 1 KiB, copied by
MirrorMaker 2 (defaults, ``tasks.max`` = P) and by our job in available-now mode (exactly once,
2 tasks); records/s from the first record visible on the target to the last (bench.watch).

Topics: T topics of one partition with ``--per-topic`` records of 100 B each, both replicators in
continuous mode on a pattern admitting them (MM2 ``tasks.max`` = min(T, 8)); records/s from the
first record visible on the target to the last. Then, with the replicator still running, a new
topic matching the pattern is created and one record written to it: the seconds from creating the
topic until that record is visible on the target. Each count (of partitions too) is run ``--repeat`` times,
the tools taking turns to go first; each figure is the median of its runs (every run is kept in the result):
a copy of 100 topics lasts a few tenths of a second, and one slow run must not stand for a shape.
MM2 looks for new topics every ``refresh.topics.interval.seconds`` (default 600 s, which alone would
decide this figure): it runs here with 5 s, ours plans at every trigger (1 s).

Idle: both replicators holding ``--idle-topics`` empty topics of one partition in continuous mode;
the CPU seconds per minute of each one's process tree over IDLE_WINDOW_S, once every remote topic
exists and IDLE_SETTLE_S more have passed; ``--repeat`` times too, the median run reported (single
runs of either tool spread by a few tenths of a CPU second a minute).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psutil

from bench import available_now, latency, mm2, replicators
from bench.common import fill_partitions
from bench.watch import POLL_S, RecordWatch, visible_records
from srm.config import load_config
from srm.config.model import Cluster
from srm.kafka import clients
from srm.kafka.topics import NewTopicSpec, ensure_topic, ensure_topics, partition_counts

MM2_REFRESH = ("refresh.topics.interval.seconds = 5",)
CATCH_UP_TIMEOUT_S = 600.0
NEW_TOPIC_TIMEOUT_S = 120.0
IDLE_SETTLE_S = 60.0  # after the remote topics exist: start-up work done (MM2's first refresh, our first leases)
IDLE_WINDOW_S = 180.0


def by_partitions(config_path: Path, partitions: int, records: int, repeat: int = 1) -> dict[str, Any]:
    """One topic of ``partitions`` partitions, each tool ``repeat`` times (:func:`rounds`)."""

    def run(tool: str) -> dict[str, Any]:
        if tool == "mirrormaker2":
            return mm2.run(config_path, records, 1024, partitions)
        return available_now.run(config_path, records, 1024, partitions, exactly_once=True, tasks=2)

    figures = rounds(repeat, f"{partitions} partition(s)", run)
    theirs, mine = figures["mirrormaker2"], figures["ours"]
    return {
        "partitions": partitions,
        "records": records,
        "record_size": 1024,
        "mirrormaker2": theirs,
        "ours": mine,
        "ours_vs_mm2": ratio(mine["copy_records_per_s"], theirs["copy_records_per_s"]),
    }


def ratio(ours: float | None, theirs: float | None) -> float | None:
    return round(ours / theirs, 2) if ours and theirs else None


def fill_topics(source: Cluster, names: list[str], per_topic: int) -> None:
    ensure_topics(clients.admin_client(source), [NewTopicSpec(name, 1) for name in names])
    fill_partitions(source, [(name, 0) for name in names], per_topic)


def new_topic_seconds(source: Cluster, target: Cluster, name: str, remote: str) -> tuple[float | None, float | None]:
    """Seconds from creating ``name`` (and writing one record) until the record is on the target,
    and from the record's write (its acknowledgement by the source) until then; Nones if it never
    came. Creating a topic on a source of thousands and the producer's first metadata of it take
    a second or more before the record exists, paid the same whichever tool replicates."""
    admin, target_admin = clients.admin_client(source), clients.admin_client(target)
    started = time.monotonic()
    ensure_topic(admin, name, 1)
    producer = clients.producer(source)
    producer.produce(name, value=b"new")
    producer.flush(30)
    written = time.monotonic()
    while time.monotonic() - started < NEW_TOPIC_TIMEOUT_S:
        if visible_records(target_admin, {remote: 1}) >= 1:
            now = time.monotonic()
            return round(now - started, 2), round(now - written, 2)
        time.sleep(POLL_S)
    return None, None


def tree_cpu_seconds(pid: int) -> dict[int, float]:
    """User and system CPU seconds so far of each live process of ``pid``'s tree and process group.

    The tree, not the group alone: PySpark's worker daemon puts itself and the Python workers it
    forks (ours' copiers) in a process group of their own, which a count by the launched process's
    group left out."""
    found = {}
    try:
        root = psutil.Process(pid)
        processes = {p.pid: p for p in [root, *root.children(recursive=True), *replicators.group(pid)]}
    except psutil.Error:
        processes = {p.pid: p for p in replicators.group(pid)}
    for process in processes.values():
        with contextlib.suppress(psutil.Error):
            times = process.cpu_times()
            found[process.pid] = times.user + times.system
    return found


def cpu_used(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU seconds between two readings of a process group: of each process alive at the second,
    what it used since the first (all of it if it started meanwhile). A process that ended in
    between is not counted (its share is lost: idle replicators start none)."""
    return sum(max(0.0, used - before.get(pid, 0.0)) for pid, used in after.items())


def remote_topics_created(target: Cluster, remotes: list[str]) -> int:
    existing = partition_counts(clients.admin_client(target))
    return sum(1 for name in remotes if name in existing)


def start_on_pattern(
    tool: str, config_path: Path, workdir: Path, pattern: str, topics: int
) -> tuple[subprocess.Popen[bytes], str]:
    """``tool`` replicating the topics ``pattern`` admits, continuously: (its process, the source's
    alias on the target). MM2 with ``tasks.max`` = min(topics, 8) and a 5 s topic refresh."""
    if tool == "ours":
        return replicators.ours(config_path, workdir, pattern)
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    return replicators.mirrormaker2(source, target, workdir, pattern, tasks=min(topics, 8), extra=MM2_REFRESH)


def idle_cpu(
    config_path: Path, topics: int, tool: str, settle_s: float = IDLE_SETTLE_S, window_s: float = IDLE_WINDOW_S
) -> dict[str, Any]:
    """CPU seconds per minute of ``tool`` holding ``topics`` empty topics of one partition.

    Both replicators run in continuous mode on a pattern admitting the topics; the window starts
    once every remote topic exists on the target (both create them when they start replicating a
    topic) and ``settle_s`` after that, so the start-up is not counted."""
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    prefix = f"bench-idle-{uuid.uuid4().hex[:6]}-"
    names = [f"{prefix}{i:04d}" for i in range(topics)]
    ensure_topics(clients.admin_client(source), [NewTopicSpec(name, 1, 1) for name in names])
    with tempfile.TemporaryDirectory() as tmp:
        process, alias = start_on_pattern(tool, config_path, Path(tmp), f"{prefix}.*", topics)
        remotes = [f"{alias}.{name}" for name in names]
        try:
            started = time.monotonic()
            while remote_topics_created(target, remotes) < topics:
                if time.monotonic() - started > CATCH_UP_TIMEOUT_S or process.poll() is not None:
                    raise RuntimeError(
                        f"{tool} did not create the {topics} remote topics within {CATCH_UP_TIMEOUT_S:.0f} s"
                    )
                time.sleep(1.0)
            ready_s = time.monotonic() - started
            time.sleep(settle_s)
            before, at = tree_cpu_seconds(process.pid), time.monotonic()
            time.sleep(window_s)
            used, seconds = cpu_used(before, tree_cpu_seconds(process.pid)), time.monotonic() - at
        finally:
            replicators.stop(process)
    latency.delete_topics(source, names)
    latency.delete_topics(target, remotes)
    return {
        "tool": tool,
        "topics": topics,
        "remote_topics_after_s": round(ready_s, 1),
        "window_s": round(seconds, 1),
        "cpu_seconds_per_minute": round(60 * used / seconds, 2),
    }


def by_topics(config_path: Path, topics: int, per_topic: int, tool: str) -> dict[str, Any]:
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    prefix = f"bench-scale-{uuid.uuid4().hex[:6]}-"
    names = [f"{prefix}{i:04d}" for i in range(topics)]
    fill_topics(source, names, per_topic)
    records = topics * per_topic
    with tempfile.TemporaryDirectory() as tmp:
        process, alias = start_on_pattern(tool, config_path, Path(tmp), f"{prefix}.*", topics)
        try:
            watch = RecordWatch(target, {f"{alias}.{name}": 1 for name in names}, records)
            watch.join(CATCH_UP_TIMEOUT_S)
            watch.stop()
            new = f"{prefix}new"
            new_s, after_write_s = (None, None)
            if watch.done:
                new_s, after_write_s = new_topic_seconds(source, target, new, f"{alias}.{new}")
        finally:
            replicators.stop(process)
    latency.delete_topics(source, [*names, new])
    latency.delete_topics(target, [f"{alias}.{name}" for name in [*names, new]])
    return {
        "tool": tool,
        "topics": topics,
        "records": records,
        "record_size": 100,
        "copied_all": watch.done is not None,
        "seen": watch.seen,
        **watch.figures(records, 100),
        "new_topic_seconds": new_s,
        "new_topic_after_write_seconds": after_write_s,
    }


TOOL_ORDER = (("mirrormaker2", "ours"), ("ours", "mirrormaker2"))  # round by round: each goes first in turn
MEDIAN_FIGURES = ("first_record_after_s", "new_topic_seconds", "new_topic_after_write_seconds")


def rounds(
    repeat: int, shape: str, run: Callable[[str], dict[str, Any]], by: str = "copy_records_per_s"
) -> dict[str, dict[str, Any]]:
    """Each tool's figures (:func:`median_run` by the figure ``by``) over ``repeat`` rounds of
    ``run(tool)``, the tools taking turns to go first."""
    runs: dict[str, list[dict[str, Any]]] = {tool: [] for tool in TOOL_ORDER[0]}
    for round_ in range(repeat):
        for tool in TOOL_ORDER[round_ % 2]:
            print(f"  {shape}: {tool} ({round_ + 1} of {repeat})", flush=True)
            runs[tool].append(run(tool))
    return {tool: median_run(tool_runs, by) for tool, tool_runs in runs.items()}


def median_run(
    runs: list[dict[str, Any]], by: str = "copy_records_per_s", medians: tuple[str, ...] = MEDIAN_FIGURES
) -> dict[str, Any]:
    """One tool's figures over its ``runs`` of a shape: the run of the median ``by`` (the copy rate:
    its rate, copy time and poll figures belong together; idle: the CPU a minute), the medians of
    ``medians`` (the first record and the new topic's times) over all runs (those that had one),
    and every run under ``runs``."""
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=lambda r: r.get(by) or 0)  # a copy that did not finish: lowest
    figures = {**ordered[(len(ordered) - 1) // 2], "runs": runs}
    for name in medians:
        if any(name in r for r in runs):  # the topics' runs have them, the partitions' not
            values = [r[name] for r in runs if r.get(name) is not None]
            figures[name] = round(statistics.median(values), 2) if values else None
    return figures


def measure(
    config_path: Path,
    partitions: list[int],
    records: int,
    topics: list[int],
    per_topic: int,
    *,
    idle_topics: int | None = None,
    idle_settle_s: float = IDLE_SETTLE_S,
    idle_window_s: float = IDLE_WINDOW_S,
    repeat: int = 1,
) -> dict[str, Any]:
    result: dict[str, Any] = {"partitions": [], "topics": [], "idle": None}
    for count in partitions:
        result["partitions"].append(by_partitions(config_path, count, records, repeat))
    for count in topics:
        row: dict[str, Any] = {"topics": count, "per_topic": per_topic}
        row |= rounds(repeat, f"{count} topic(s)", partial(by_topics, config_path, count, per_topic))
        row["ours_vs_mm2"] = ratio(row["ours"]["copy_records_per_s"], row["mirrormaker2"]["copy_records_per_s"])
        result["topics"].append(row)
    if idle_topics:

        def hold(tool: str) -> dict[str, Any]:
            return idle_cpu(config_path, idle_topics, tool, idle_settle_s, idle_window_s)

        idle = rounds(repeat, f"{idle_topics} idle topic(s)", hold, "cpu_seconds_per_minute")
        result["idle"] = {"topics": idle_topics, **idle}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--partitions", default="8,512,2048")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--topics", default="1,100,1000,2000")
    parser.add_argument("--per-topic", type=int, default=100)
    parser.add_argument(
        "--idle-topics", type=int, default=2000, help="CPU of both holding this many empty topics (0: not)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="runs of each count per tool (medians)")
    args = parser.parse_args()
    result = measure(
        Path(args.config),
        [int(p) for p in args.partitions.split(",") if p],
        args.records,
        [int(t) for t in args.topics.split(",") if t],
        args.per_topic,
        idle_topics=args.idle_topics,
        repeat=args.repeat,
    )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
