"""Aggregation: several source clusters replicating into one target at once (SRM's "many clusters
into one"), ours with a flow and a continuous job per source, MirrorMaker 2 with the same flows in
one process.

    .venv/bin/python -m bench.aggregation [--sources 3] [--topics 100] [--per-topic 1000]

The clusters of the config's first flow (``make kafka-up``) are the first source and the target;
the other sources are local clusters the benchmark starts for itself (srm.devenv.local) and stops
at the end. Each source gets ``--topics`` topics of one partition with ``--per-topic`` records of
100 B whose values begin with their sequence number (the same topic names on every source: the
target keeps them apart under the source's alias). Each tool, in turn, copies them in continuous
mode from its start (ours: one replicate job per flow, all at once, two copy slots each; MM2: its
defaults but a 5 s topic refresh and ``tasks.max`` min(topics, 8) per flow), and once everything
is on the target a second wave of as many records goes to every topic while it runs. Figures: the
first record on the target after the start, the first wave from its first record to its last
(records/s), the second wave's last record after the last was written, the CPU seconds of the
tool's processes and their memory at the end; then every remote topic is read whole, committed
records only: each sequence number once and in order (missing, duplicated and out of order).
"""

from __future__ import annotations

import argparse
import itertools
import json
import struct
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import yaml

from bench import latency, replicators
from bench.common import fill_partitions
from bench.mm2 import mm2_properties
from bench.scale import MM2_REFRESH, cpu_used, tree_cpu_seconds
from bench.usage import sample
from bench.watch import RecordWatch
from srm.config import load_config
from srm.config.model import Cluster
from srm.devenv.jvm import kafka_command
from srm.devenv.local import LocalClusters
from srm.kafka import clients
from srm.kafka.topics import NewTopicSpec, ensure_topics
from srm.spark.submit import spark_submit_command, submit_environment
from tests.conftest import free_ports
from tests.replication import SINGLE_BROKER

SIZE = 100
SEQUENCE = struct.Struct(">q")
COPY_TIMEOUT_S = 900.0


def value(sequence: int) -> bytes:
    return SEQUENCE.pack(sequence) + b"a" * (SIZE - SEQUENCE.size)


def more_sources(base: Path, count: int) -> tuple[LocalClusters, list[Cluster]]:
    """``count`` local clusters started in ``base``, and their models (plaintext, loopback)."""
    ports = free_ports(2 * count)
    data = {
        "clusters": {
            f"agg{i}": {
                "bootstrap.servers": f"127.0.0.1:{ports[2 * i]}",
                "local": {"controller.port": ports[2 * i + 1]},
            }
            for i in range(count)
        }
    }
    path = base / "sources.yaml"
    path.write_text(yaml.safe_dump(data))
    config = load_config(path)
    running = LocalClusters(config.local_clusters(), base)
    try:
        running.up()
    except BaseException:  # those that started stop before their folder goes
        running.down()
        raise
    return running, list(config.clusters)


def write_wave(sources: list[Cluster], names: list[str], first: int, count: int) -> None:
    """Records ``first`` to ``first + count - 1`` (their sequence numbers) to every topic of every source."""
    for source in sources:
        fill_partitions(source, [(name, 0) for name in names], count, value=lambda i: value(first + i))


def ours(sources: list[Cluster], target: Cluster, workdir: Path, pattern: str) -> tuple[list[Any], list[str]]:
    """One continuous replicate job per source, started together: (their processes, the sources' aliases)."""
    token = uuid.uuid4().hex[:6]
    aliases = [f"s{i}{token}" for i in range(len(sources))]
    data = {
        "defaults": SINGLE_BROKER,
        "clusters": {
            **{alias: {"bootstrap.servers": s.bootstrap_servers} for alias, s in zip(aliases, sources, strict=True)},
            f"t{token}": {"bootstrap.servers": target.bootstrap_servers},
        },
        "flows": [{"source": alias, "target": f"t{token}", "topics": [pattern], "tasks.max": 2} for alias in aliases],
        "storage": {"warehouse": str(workdir / "warehouse"), "plan_logs": str(workdir / "plan-logs")},
    }
    path = workdir / "aggregation.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    processes: list[Any] = []
    try:
        for alias in aliases:
            command = spark_submit_command(
                "replicate.py",
                ["--source", alias, "--target", f"t{token}", "--mode", "continuous", "--config", str(path)],
            )
            with (workdir / f"ours-{alias}.log").open("w") as out:
                processes.append(
                    subprocess.Popen(
                        command, env=submit_environment(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                    )
                )
    except BaseException:
        for process in processes:
            replicators.stop(process)
        raise
    return processes, aliases


def mirrormaker2(
    sources: list[Cluster], target: Cluster, workdir: Path, pattern: str, topics: int
) -> tuple[list[Any], list[str]]:
    """One MirrorMaker 2 with a flow from each source to the target: ([its process], the sources' aliases)."""
    token = uuid.uuid4().hex[:6]
    servers = {f"m{i}{token}": replicators.plaintext_servers(s, "MirrorMaker 2") for i, s in enumerate(sources)}
    props = workdir / "mm2-aggregation.properties"
    target_servers = replicators.plaintext_servers(target, "MirrorMaker 2")
    props.write_text(mm2_aggregation(servers, (f"t{token}", target_servers), pattern, min(topics, 8)))
    command = kafka_command("org.apache.kafka.connect.mirror.MirrorMaker", str(props), heap="1g")
    with (workdir / "mm2-aggregation.log").open("w") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    return [process], list(servers)


def mm2_aggregation(sources: dict[str, str], target: tuple[str, str], pattern: str, tasks: int) -> str:
    """MM2's properties for a flow from each of ``sources`` (alias -> servers) to ``target`` (alias,
    servers): bench.mm2's for each pair, one list of clusters, ``tasks`` per flow, a 5 s topic refresh."""
    alias, servers = target
    lines = [f"clusters = {', '.join([*sources, alias])}"]
    for source, source_servers in sources.items():
        pair = mm2_properties({source: source_servers, alias: servers}, pattern, tasks).splitlines()
        lines += [f"{source}->{alias}.tasks.max = {tasks}", *pair]
    kept = [line for line in dict.fromkeys(lines) if line and not line.startswith(("clusters = ", "tasks.max = "))]
    return "\n".join([lines[0], *kept, *MM2_REFRESH, ""])


def sequences(target: Cluster, remotes: list[str]) -> dict[str, list[int]]:
    """Every committed record's sequence number, per remote topic (one partition each), in order."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = clients.reader(target, f"bench-aggregation-{uuid.uuid4().hex[:6]}")
    found: dict[str, list[int]] = {name: [] for name in remotes}
    waiting = set(remotes)
    consumer.assign([TopicPartition(name, 0, OFFSET_BEGINNING) for name in remotes])
    deadline = time.monotonic() + COPY_TIMEOUT_S
    try:
        while waiting and time.monotonic() < deadline:
            for message in consumer.consume(10_000, 0.1):
                if message.error() is None:
                    found[message.topic()].append(SEQUENCE.unpack_from(message.value())[0])
                elif message.error().name() == "_PARTITION_EOF":
                    waiting.discard(message.topic())
    finally:
        consumer.close()
    if waiting:
        raise RuntimeError(f"{len(waiting)} remote topics not read to their end within {COPY_TIMEOUT_S:.0f} s")
    return found


def exactly_once(found: dict[str, list[int]], records: int) -> dict[str, int]:
    """Missing, duplicated and out-of-order sequence numbers over every remote topic (0..records-1 each)."""
    missing = duplicated = disordered = 0
    for got in found.values():
        missing += len(set(range(records)) - set(got))
        duplicated += len(got) - len(set(got))
        disordered += sum(1 for a, b in itertools.pairwise(got) if b < a)
    return {"missing": missing, "duplicated": duplicated, "out_of_order": disordered}


def by_tool(tool: str, sources: list[Cluster], target: Cluster, topics: int, per_topic: int) -> dict[str, Any]:
    prefix = f"bench-agg-{uuid.uuid4().hex[:6]}-"
    names = [f"{prefix}{i:04d}" for i in range(topics)]
    remotes: list[str] = []
    try:
        for source in sources:
            ensure_topics(clients.admin_client(source), [NewTopicSpec(name, 1, 1) for name in names])
        write_wave(sources, names, 0, per_topic)
        records = len(sources) * topics * per_topic
        with tempfile.TemporaryDirectory() as tmp:
            workdir = Path(tmp)
            if tool == "ours":
                processes, aliases = ours(sources, target, workdir, f"{prefix}.*")
            else:
                processes, aliases = mirrormaker2(sources, target, workdir, f"{prefix}.*", topics)
            remotes = [f"{alias}.{name}" for alias in aliases for name in names]
            try:
                cpu_before = {p.pid: tree_cpu_seconds(p.pid) for p in processes}
                first = RecordWatch(target, {name: 1 for name in remotes}, records)
                first.join(COPY_TIMEOUT_S)
                first.stop()
                if first.done is None:
                    raise RuntimeError(
                        f"{tool}: {first.seen:,} of {records:,} records on the target in {COPY_TIMEOUT_S:.0f} s"
                    )
                written = time.monotonic()
                write_wave(sources, names, per_topic, per_topic)
                wrote_s = time.monotonic() - written
                second = RecordWatch(target, {name: 1 for name in remotes}, 2 * records)
                second.join(COPY_TIMEOUT_S)
                second.stop()
                after_write_s = round(second.done - written - wrote_s, 2) if second.done is not None else None
                cpu = sum(cpu_used(cpu_before[p.pid], tree_cpu_seconds(p.pid)) for p in processes)
                memory = [sample(p.pid) for p in processes]
                running = all(p.poll() is None for p in processes)
            finally:
                for process in processes:
                    replicators.stop(process)
            checked = exactly_once(sequences(target, remotes), 2 * per_topic)
    finally:  # what a run leaves on the clusters, whatever ended it
        for source in sources:
            latency.delete_topics(source, names)
        latency.delete_topics(target, remotes)
    return {
        "tool": tool,
        "records_per_wave": records,
        **first.figures(records, SIZE),
        "second_wave_after_write_s": after_write_s,
        "second_wave_writing_s": round(wrote_s, 2),
        "cpu_seconds": round(cpu, 1),
        "rss_mb_at_end": round(sum(m.rss_mb for m in memory)),
        "pss_mb_at_end": round(sum(m.pss_mb for m in memory)),
        "still_running": running,
        **checked,
    }


def measure(config_path: Path, sources: int, topics: int, per_topic: int) -> dict[str, Any]:
    config = load_config(config_path)
    flow = config.enabled_flows()[0]
    first, target = config.cluster(flow.source), config.cluster(flow.target)
    with tempfile.TemporaryDirectory() as tmp:
        started, extra = more_sources(Path(tmp), sources - 1)
        try:
            rows = {}
            for tool in ("mirrormaker2", "ours"):
                print(f"  {sources} sources x {topics} topics: {tool}", flush=True)
                rows[tool] = by_tool(tool, [first, *extra], target, topics, per_topic)
        finally:
            started.down()
    mm2, mine = rows["mirrormaker2"]["copy_records_per_s"], rows["ours"]["copy_records_per_s"]
    return {
        "sources": sources,
        "topics_per_source": topics,
        "per_topic": per_topic,
        "record_size": SIZE,
        **rows,
        "ours_vs_mm2": round(mine / mm2, 2) if mine and mm2 else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--sources", type=int, default=3)
    parser.add_argument("--topics", type=int, default=100, help="per source")
    parser.add_argument("--per-topic", type=int, default=1000, help="records of each wave")
    args = parser.parse_args()
    print(json.dumps(measure(Path(args.config), args.sources, args.topics, args.per_topic), indent=2))


if __name__ == "__main__":
    main()
