"""``make demo``: demo data on the first flow's source, replicated exactly once, offsets translated.

Creates ``demo-orders`` (3 partitions) with 1,000 keyed records carrying headers on the source of
the first enabled flow (once), runs that flow's Spark replication job in available-now mode with
``spark-submit`` (as ``srm-control run replicate`` does), prints every local cluster's topics with
record counts and compares the demo topic with its remote copy; then a consumer group
``demo-billing`` commits its position on the source, a checkpoint pass runs, and the group's
translated offsets on the target are printed.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys

from srm import clients
from srm.config import load_config
from srm.config.model import Cluster, Flow, SrmConfig
from srm.errors import SrmError
from srm.offsets.api import Translator
from srm.sparkapp import spark_submit_command, submit_environment
from srm.topics import describe, ensure_topic, record_counts

DEMO_TOPIC = "demo-orders"
DEMO_PARTITIONS = 3
DEMO_RECORDS = 1000
DEMO_GROUP = "demo-billing"


def produce_demo_data(cluster: Cluster) -> int:
    """Create the demo topic and fill it; returns how many records were produced (0 if it existed)."""
    if not ensure_topic(clients.admin_client(cluster), DEMO_TOPIC, DEMO_PARTITIONS):
        return 0
    producer = clients.producer(cluster, **{"enable.idempotence": True})
    for i in range(DEMO_RECORDS):
        order = {"order_id": i, "customer": f"c{i % 17}", "amount_cents": 100 + (i * 37) % 9000}
        producer.produce(
            DEMO_TOPIC,
            key=f"c{i % 17}".encode(),
            value=json.dumps(order).encode(),
            headers=[("source", b"demo"), ("schema", b"order-v1")],
        )
        producer.poll(0)
    remaining = producer.flush(30)
    if remaining:
        raise SrmError(f"{remaining} demo records were not acknowledged by {cluster.alias} within 30 s")
    return DEMO_RECORDS


def submit(config: SrmConfig, flow: Flow, job: str, *extra: str) -> None:
    """A Spark job of ``flow``, exactly as ``srm-control run <job>`` submits it."""
    args = ["--source", flow.source, "--target", flow.target, "--config", config.file, *extra]
    command = spark_submit_command(f"{job}.py", args)
    print(f"\nrunning the {job} job of {flow.name}:\n  {shlex.join(command)}", flush=True)
    result = subprocess.run(command, env=submit_environment(), check=False)
    if result.returncode != 0:
        raise SrmError(f"the {job} job of {flow.name} failed (exit code {result.returncode})")


def translate_demo_group(config: SrmConfig, flow: Flow) -> None:
    """A group that read half of each partition on the source, and where it resumes on the target."""
    from confluent_kafka import TopicPartition

    source = config.cluster(flow.source)
    consumer = clients.consumer(source, DEMO_GROUP, **{"enable.partition.eof": True})
    try:
        half = {p: count // 2 for p, count in record_counts(consumer, DEMO_TOPIC, DEMO_PARTITIONS).items()}
        consumer.commit(offsets=[TopicPartition(DEMO_TOPIC, p, o) for p, o in half.items()], asynchronous=False)
    finally:
        consumer.close()
    submit(config, flow, "checkpoints")
    print(f"\n{DEMO_GROUP}: committed on {flow.source} -> checkpoint on {flow.target}")
    for t in Translator(config, flow).group(DEMO_GROUP):
        print(f"  {t.from_topic}[{t.partition}] offset {t.from_offset} -> {t.topic}[{t.partition}] offset {t.offset}")


def show_clusters(config: SrmConfig) -> None:
    for cluster in config.local_clusters():
        consumer = clients.consumer(cluster, "srm-demo-inspector")
        try:
            topics = describe(clients.admin_client(cluster), consumer)
        finally:
            consumer.close()
        print(f"{cluster.alias} ({cluster.bootstrap_servers}): {len(topics)} topic(s)")
        for info in topics:
            print(f"  {info}")


def compare(config: SrmConfig, flow: Flow) -> None:
    """Records per partition of the demo topic and of its remote copy."""
    remote = flow.policy.format_remote_topic(flow.source, DEMO_TOPIC)
    print()
    for cluster, topic in ((config.cluster(flow.source), DEMO_TOPIC), (config.cluster(flow.target), remote)):
        consumer = clients.consumer(cluster, "srm-demo-inspector", **{"enable.partition.eof": True})
        try:
            counts = record_counts(consumer, topic, DEMO_PARTITIONS)
        finally:
            consumer.close()
        print(f"{cluster.alias}:{topic}: {sum(counts.values())} records, per partition {list(counts.values())}")


def main() -> int:
    config = load_config()
    flows = config.enabled_flows()
    if not flows:
        print("error: the configuration has no enabled flow", file=sys.stderr)
        return 1
    flow = flows[0]
    source = config.cluster(flow.source)
    try:
        produced = produce_demo_data(source)
        print(
            f"{source.alias}: produced {produced} records to {DEMO_TOPIC}"
            if produced
            else f"{source.alias}: {DEMO_TOPIC} already exists, nothing produced"
        )
        submit(config, flow, "replicate", "--mode", "available-now")
        show_clusters(config)
        compare(config, flow)
        translate_demo_group(config, flow)
    except SrmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
