"""Helpers for tests that talk to real clusters: produce, read a whole topic, run srm-control."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from srm.config.model import Cluster
from srm.kafka import clients


def produce(cluster: Cluster, topic: str, records: list[dict[str, Any]], attempts: int = 3) -> None:
    """Produce ``records`` (kwargs of ``Producer.produce``) idempotently; fail if any is not acked.
    A record refused with a retriable error (a topic created an instant ago, not yet known to every
    broker) is produced again, up to ``attempts`` times."""
    producer = clients.producer(cluster, **{"enable.idempotence": True})
    pending = list(records)
    for _ in range(attempts):
        failed: list[tuple[dict[str, Any], Any]] = []
        for record in pending:
            producer.produce(
                topic, **record, on_delivery=lambda err, _msg, r=record, f=failed: err is None or f.append((r, err))
            )
        assert producer.flush(30) == 0, f"records to {topic} not acknowledged within 30 s"
        if not failed:
            return
        assert all(err.retriable() for _, err in failed), f"records to {topic} refused: {failed[0][1]}"
        pending = [r for r, _ in failed]
        time.sleep(0.5)
    raise AssertionError(f"{len(pending)} record(s) to {topic} refused {attempts} times")


def read_all(cluster: Cluster, topic: str, expected: int, timeout_s: float = 30.0) -> list[Any]:
    """Every committed record of ``topic`` from the beginning, waiting until ``expected`` arrived.

    Assigns partitions directly (no group rebalance), so a read takes milliseconds. A just-created
    topic's metadata may name only some of its partitions at first: they are listed again each
    second until the records are in, and the ones found later are assigned too.
    """
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = clients.consumer(cluster, "srm-test-reader")
    assigned: set[int] = set()
    records: list[Any] = []
    deadline = time.monotonic() + timeout_s
    listed = 0.0
    try:
        while len(records) < expected and time.monotonic() < deadline:
            if time.monotonic() - listed >= 1.0:
                listed = time.monotonic()
                metadata = consumer.list_topics(topic, timeout=10).topics[topic]
                found = set(metadata.partitions) - assigned
                if found:
                    consumer.incremental_assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(found)])
                    assigned |= found
            for message in consumer.consume(num_messages=500, timeout=0.05):
                assert message.error() is None, message.error()
                records.append(message)
    finally:
        consumer.close()
    return records


def srm_control(config: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``srm-control <command> --config <config> <args...>`` as a user runs it, output captured."""
    command = [str(Path(sys.executable).parent / "srm-control"), *args[:1], "--config", str(config), *args[1:]]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def offline_config(folder: Path) -> Path:
    """``folder/srm.yaml``: one flow west->east between clusters where nothing listens, the warehouse
    and checkpoints in ``folder`` (for tests of what reads only the warehouse)."""
    import yaml

    data = {
        "clusters": {"west": {"bootstrap.servers": "127.0.0.1:1"}, "east": {"bootstrap.servers": "127.0.0.1:2"}},
        "flows": [{"source": "west", "target": "east"}],
        "storage": {"warehouse": str(folder / "warehouse"), "plan_logs": str(folder / "plan-logs")},
    }
    path = folder / "srm.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def spark_defaults(folder: Path, events: Path) -> Path:
    """A SPARK_CONF_DIR as an operator's: event logs on. Event logs and broadcasts (the tasks' pickled
    closures) uncompressed, so the test reads them as they are, not as zstd/lz4 frames."""
    folder.mkdir()
    events.mkdir()
    settings = {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.broadcast.compress": "false",
        "spark.eventLog.compress": "false",
    }
    (folder / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in settings.items()))
    return folder
