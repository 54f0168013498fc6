"""Starting the two replicators the benchmarks compare, on the first flow's clusters, under
fresh cluster aliases (so each run has its own remote topics and internal topics).

``ours`` runs ``spark/replicate.py`` in continuous mode for a flow admitting ``topics`` (a
regex); ``mirrormaker2`` runs Apache Kafka's MirrorMaker 2 in dedicated mode from the resolved
jars with its defaults (bench.mm2.mm2_properties) plus ``extra`` properties. Both return the
process (its own session: stop it with ``stop``) and the source alias, the prefix of the remote
topics.
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from pathlib import Path
from typing import Any

from bench.available_now import flow_config
from bench.mm2 import mm2_properties
from srm.config.model import Cluster
from srm.jvm import kafka_command
from srm.sparkapp import spark_submit_command, submit_environment


def ours(
    config_path: Path, workdir: Path, topics: str, tasks: int = 2, settings: dict[str, Any] | None = None
) -> tuple[subprocess.Popen[bytes], str]:
    path, source, target = flow_config(config_path, workdir, topics, True, tasks, **(settings or {}))
    command = spark_submit_command(
        "replicate.py", ["--source", source, "--target", target, "--mode", "continuous", "--config", str(path)]
    )
    out = (workdir / f"ours-{source}.log").open("w")
    process = subprocess.Popen(
        command, env=submit_environment(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    return process, source


def mirrormaker2(
    source: Cluster, target: Cluster, workdir: Path, topics: str, *, tasks: int, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[bytes], str]:
    alias = f"m{uuid.uuid4().hex[:6]}"
    servers = {alias: source.bootstrap_servers or "", f"t{alias}": target.bootstrap_servers or ""}
    props = workdir / f"mm2-{alias}.properties"
    props.write_text(mm2_properties(servers, topics, tasks) + "".join(f"{line}\n" for line in extra))
    out = (workdir / f"mm2-{alias}.log").open("w")
    command = kafka_command("org.apache.kafka.connect.mirror.MirrorMaker", str(props), heap="1g")
    return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True), alias


def stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)
