"""Starting the two replicators the benchmarks compare, on the first flow's clusters, under
fresh cluster aliases (so each run has its own remote topics and internal topics).

``ours`` runs ``spark/replicate.py`` in continuous mode for a flow admitting ``topics`` (a
regex); ``mirrormaker2`` runs Apache Kafka's MirrorMaker 2 in dedicated mode from the resolved
jars with its defaults (bench.mm2.mm2_properties) plus ``extra`` properties. Both return the
process (its own session: stop it with ``stop``) and the source alias, the prefix of the remote
topics. ``textbook`` runs bench.textbook_copier, Kafka's exactly-once pattern without anything
of ours, for one topic; ``textbook_java`` the same in Java (bench/TextbookCopier.java), with Kafka's
own clients, which speak transactions v2 where librdkafka speaks v1.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import psutil

from bench.available_now import flow_config
from bench.mm2 import mm2_properties
from srm.config.model import Cluster
from srm.devenv.jvm import kafka_command
from srm.paths import project_root
from srm.spark import driver
from srm.spark.submit import spark_submit_command, submit_environment


def ours(
    config_path: Path,
    workdir: Path,
    topics: str,
    tasks: int = 2,
    settings: dict[str, Any] | None = None,
    *,
    exactly_once: bool = True,
) -> tuple[subprocess.Popen[bytes], str]:
    path, source, target = flow_config(config_path, workdir, topics, exactly_once, tasks, **(settings or {}))
    command = spark_submit_command(
        "replicate.py", ["--source", source, "--target", target, "--mode", "continuous", "--config", str(path)]
    )
    out = (workdir / f"ours-{source}.log").open("w")
    # the stop's SIGTERM to the whole session reaches the Python driver alone (srm.spark.driver)
    process = subprocess.Popen(
        driver.ignoring(command), env=submit_environment(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    return process, source


RUN_ALIAS = re.compile(r"(?:bs|m|x|j)([0-9a-f]{6})")


def run_token(alias: str) -> str | None:
    """The random part of the alias a replicator's start returned, which every topic of its run
    holds (bench.common.drop_run_topics): ours ``bs<token>`` (its flow's target ``bt<token>``),
    MirrorMaker 2 ``m<token>`` (``tm<token>``), Kafka's textbook copiers ``x<token>`` and ``j<token>``.
    None for an alias not made here: topics are never deleted by a part of a name someone chose."""
    match = RUN_ALIAS.fullmatch(alias)
    return match[1] if match else None


def mirrormaker2(
    source: Cluster, target: Cluster, workdir: Path, topics: str, *, tasks: int, extra: tuple[str, ...] = ()
) -> tuple[subprocess.Popen[bytes], str]:
    alias = f"m{uuid.uuid4().hex[:6]}"
    servers = {
        alias: plaintext_servers(source, "MirrorMaker 2"),
        f"t{alias}": plaintext_servers(target, "MirrorMaker 2"),
    }
    props = workdir / f"mm2-{alias}.properties"
    props.write_text(mm2_properties(servers, topics, tasks) + "".join(f"{line}\n" for line in extra))
    out = (workdir / f"mm2-{alias}.log").open("w")
    command = kafka_command("org.apache.kafka.connect.mirror.MirrorMaker", str(props), heap="1g")
    return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True), alias


def textbook(config_path: Path, workdir: Path, topic: str, partitions: int) -> tuple[subprocess.Popen[bytes], str]:
    alias = f"x{uuid.uuid4().hex[:6]}"
    command = [sys.executable, "-m", "bench.textbook_copier", "--config", str(config_path.resolve())]
    command += ["--topic", topic, "--remote", f"{alias}.{topic}", "--partitions", str(partitions)]
    out = (workdir / f"textbook-{alias}.log").open("w")
    # bench is a folder of the checkout, not an installed package: run from the checkout
    process = subprocess.Popen(
        command, cwd=project_root(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )
    return process, alias


def textbook_java(
    source: Cluster, target: Cluster, workdir: Path, topic: str, partitions: int
) -> tuple[subprocess.Popen[bytes], str]:
    alias = f"j{uuid.uuid4().hex[:6]}"
    program = project_root() / "bench" / "TextbookCopier.java"
    servers = (
        plaintext_servers(source, "the Java textbook copier"),
        plaintext_servers(target, "the Java textbook copier"),
    )
    arguments = (*servers, topic, f"{alias}.{topic}")
    # The JDK's source launcher compiles and runs the one file: the main class is its path.
    command = kafka_command(str(program), *arguments, str(partitions), heap="1g")
    out = (workdir / f"textbook-{alias}.log").open("w")
    return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True), alias


def plaintext_servers(cluster: Cluster, tool: str) -> str:
    """The cluster's bootstrap servers for a JVM tool the benchmarks start with nothing but them."""
    protocol = str(cluster.client.get("security.protocol", "PLAINTEXT")).upper()
    if not cluster.bootstrap_servers or protocol != "PLAINTEXT":
        raise SystemExit(
            f"clusters.{cluster.alias} ({cluster.describe()}, security.protocol {protocol}): the benchmarks run "
            f"{tool} on plaintext clusters with bootstrap.servers only"
        )
    return cluster.bootstrap_servers


def stop(process: subprocess.Popen[Any]) -> None:
    """Stop the replicator's whole session and wait until none of its processes is left: the
    Python driver of a Spark job may still be flushing metrics when the JVM that started it ends,
    and its work directory is removed next."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(60)
        psutil.wait_procs(group(process.pid), timeout=60)
    except subprocess.TimeoutExpired:
        pass
    for left in group(process.pid):
        with contextlib.suppress(psutil.Error):
            left.kill()
    process.wait(30)
    psutil.wait_procs(group(process.pid), timeout=30)


def group(pgid: int) -> list[psutil.Process]:
    """The live processes of process group ``pgid``."""
    found = []
    for candidate in psutil.process_iter(["status"]):
        try:
            if os.getpgid(candidate.pid) == pgid and candidate.info["status"] != psutil.STATUS_ZOMBIE:
                found.append(candidate)
        except (ProcessLookupError, psutil.Error):
            continue
    return found
