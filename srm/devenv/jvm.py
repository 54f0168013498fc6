"""Running Kafka's JVM programs (broker, tools, MirrorMaker 2) from the Maven-resolved jars."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from srm.errors import SrmError
from srm.paths import jvm_cache, project_root


def kafka_jars() -> Path:
    folder = jvm_cache() / "kafka"
    if not any(folder.glob("kafka_2.13-*.jar")):
        raise SrmError(f"Kafka jars not found in {folder}: run `make jars` (Maven resolves conf/jvm/kafka/pom.xml)")
    return folder


def java_binary() -> str:
    home = os.environ.get("JAVA_HOME")
    candidate = Path(home) / "bin" / "java" if home else None
    if candidate and candidate.exists():
        return str(candidate)
    found = shutil.which("java")
    if not found:
        raise SrmError("java not found: install a JDK 17+ or set JAVA_HOME")
    return found


def kafka_command(
    main_class: str, *args: str, heap: str = "256m", resident: bool = False, logs_dir: Path | None = None
) -> list[str]:
    """``java ... <main_class> args`` with the Kafka jars and the project's Log4j2 configuration.

    ``heap`` is the most the JVM takes (-Xmx). A ``resident`` JVM (a server that runs for days)
    starts with that whole heap, every page of it touched (-Xms = -Xmx, -XX:+AlwaysPreTouch), so its
    resident memory is what it will stay at rather than a figure that climbs for hours as the
    collector reaches heap pages for the first time. ``logs_dir`` (servers) sends logs to files
    there; without it (tools) only warnings reach stderr.
    """
    command = [java_binary(), f"-Xmx{heap}", "-XX:+UseG1GC", "-Djava.awt.headless=true"]
    if resident:
        command[1:1] = [f"-Xms{heap}", "-XX:+AlwaysPreTouch"]
    # Servers log to files under logs_dir; tools log warnings to stderr only.
    log_config = "log4j2.properties" if logs_dir is not None else "log4j2-tools.properties"
    command.append(f"-Dlog4j2.configurationFile={project_root() / 'conf' / 'jvm' / log_config}")
    if logs_dir is not None:
        command.append(f"-Dkafka.logs.dir={logs_dir}")
    return [*command, "-cp", f"{kafka_jars()}/*", main_class, *args]
