"""Entry points of the project image (Dockerfile) that take more than one command.

``python -m srm.devenv.container kafka`` runs a KRaft broker configured the way Apache Kafka's own image
(apache/kafka) is: every ``KAFKA_*`` variable is a server property (``KAFKA_LOG_DIRS`` ->
``log.dirs``; ``__`` stands for ``_`` and ``___`` for ``-``), ``CLUSTER_ID`` formats an empty log
directory, ``KAFKA_HEAP_OPTS`` sizes the heap, and ``KAFKA_OPTS``, ``KAFKA_JVM_PERFORMANCE_OPTS``,
``KAFKA_GC_LOG_OPTS``, ``KAFKA_JMX_OPTS``, ``KAFKA_LOG4J_OPTS`` are JVM options, as in
kafka-run-class.sh. docker-compose.yaml then runs either image with the
same environment (conf/compose/offline.yaml swaps the image where no registry is reachable).
``python -m srm.devenv.container kafka-ready HOST:PORT`` exits 0 when a broker there answers (a health check
that starts no JVM).
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
from collections.abc import Mapping
from pathlib import Path

from srm.devenv.jvm import kafka_command
from srm.kafka.probe import broker_answers

# KAFKA_* variables that are JVM options (kafka-run-class.sh), not server properties
JVM_OPTIONS = ("KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_JMX_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS")
NOT_PROPERTIES = {"KAFKA_HEAP_OPTS", "KAFKA_VERSION", *JVM_OPTIONS}
# Logging variables of other images (Confluent's): refused rather than read as server properties
UNSUPPORTED = ("KAFKA_LOG4J_LOGGERS", "KAFKA_LOG4J_ROOT_LOGLEVEL", "KAFKA_TOOLS_LOG4J_LOGLEVEL")
DEFAULT_LOG_DIRS = "/var/lib/kafka/data"


class BrokerEnvError(ValueError):
    """The environment cannot make a broker."""


def server_properties(env: Mapping[str, str]) -> dict[str, str]:
    """Server properties from ``KAFKA_*`` variables, as apache/kafka's image reads them."""
    props = {}
    for name, value in env.items():
        if name in UNSUPPORTED:
            raise BrokerEnvError(
                f"{name} is not read by the project image's broker: set its Log4j2 configuration with "
                "KAFKA_LOG4J_OPTS=-Dlog4j2.configurationFile=<file>"
            )
        if not name.startswith("KAFKA_") or name in NOT_PROPERTIES:
            continue
        key = re.sub(r"_+", lambda m: {1: ".", 2: "_", 3: "-"}.get(len(m.group()), m.group()), name[6:].lower())
        props[key] = value
    missing = [k for k in ("process.roles", "node.id", "listeners", "controller.quorum.voters") if k not in props]
    if missing:
        wanted = ", ".join("KAFKA_" + k.upper().replace(".", "_") for k in missing)
        raise BrokerEnvError(f"the broker's environment lacks {wanted} (see docker-compose.yaml's kafka services)")
    props.setdefault("log.dirs", DEFAULT_LOG_DIRS)
    return props


def kafka(env: Mapping[str, str], workdir: Path) -> list[str]:
    """Write the properties, format an empty log directory, return the broker's command."""
    props = server_properties(env)
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "server.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in sorted(props.items())))
    data = Path(props["log.dirs"].split(",")[0])
    if not (data / "meta.properties").exists():
        cluster_id = env.get("CLUSTER_ID")
        if not cluster_id:
            raise BrokerEnvError(f"{data} is not formatted and CLUSTER_ID is not set (22 characters, base64url)")
        data.mkdir(parents=True, exist_ok=True)
        format_command = kafka_command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(path))
        print(f"formatting {data} for cluster {cluster_id}", flush=True)
        pid = os.spawnvp(os.P_WAIT, format_command[0], format_command)
        if pid != 0:
            raise BrokerEnvError(f"formatting {data} failed (exit {pid})")
    command = kafka_command("kafka.Kafka", str(path), heap="512m")
    heap = shlex.split(env.get("KAFKA_HEAP_OPTS", ""))
    if heap:
        command = [command[0], *heap, *(c for c in command[1:] if not c.startswith("-Xmx"))]
    options = [option for name in JVM_OPTIONS for option in shlex.split(env.get(name, ""))]
    at = command.index("-cp")  # after the image's own options: the last -D of a name wins
    return [*command[:at], *options, *command[at:]]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m srm.devenv.container", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("kafka", help="run a KRaft broker from KAFKA_* variables (apache/kafka's convention)")
    ready = sub.add_parser("kafka-ready", help="exit 0 when the broker at HOST:PORT answers")
    ready.add_argument("bootstrap")
    args = parser.parse_args(argv)
    if args.command == "kafka-ready":
        return 0 if broker_answers(args.bootstrap) else 1
    try:
        command = kafka(os.environ, Path(os.environ.get("KAFKA_CONFIG_DIR", "/var/lib/kafka/config")))
    except BrokerEnvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"starting the broker: {' '.join(command[-2:])}", flush=True)
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main())
