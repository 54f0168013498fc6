"""``make demo``: the first flow of conf/srm.yaml end to end, through its Airflow DAGs.

Creates ``demo-orders`` (3 partitions) with 1,000 keyed records carrying headers on the flow's
source (once), then runs the flow's DAGs with ``airflow dags test`` in a local AIRFLOW_HOME
(``.local/airflow``): maintenance (internal and remote topics, configs, ACLs, srm-meta), replicate
in available-now mode, heartbeats (with the stall sensor), and, after a consumer group
``demo-billing`` committed half of each partition on the source, checkpoints with the group offset
sync. Prints what each DAG's tasks logged, the topics and record counts of every local cluster,
and the group's exactly translated offsets on the target.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from srm.config import load_config
from srm.config.model import Cluster, Flow, SrmConfig
from srm.devenv.airflow import LocalAirflow
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.partitions import describe, record_counts
from srm.kafka.topics import ensure_topic
from srm.offsets.api import Translator
from srm.offsets.groups import group_offsets
from srm.paths import project_root

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


class DemoAirflow:
    """The flow's DAGs run with ``airflow dags test``, each followed by what its tasks logged."""

    def __init__(self, config: SrmConfig, flow: Flow) -> None:
        self.airflow = LocalAirflow(project_root() / ".local" / "airflow", Path(config.file))
        self.prefix = f"{flow.source}_to_{flow.target}"
        reverse = [f for f in config.enabled_flows() if (f.source, f.target) == (flow.target, flow.source)]
        # A's `heartbeats` topic is written by the B->A pair: the reverse flow's DAG if there is one
        self.reverse_prefix = f"{flow.target}_to_{flow.source}" if reverse else self.prefix

    def prepare(self) -> None:
        print(f"\nAirflow: metadata database in {self.airflow.home} (airflow db migrate)", flush=True)
        self.airflow.migrate()

    def dag(self, job: str, conf: dict[str, object] | None = None) -> None:
        dag_id = f"{self.prefix}.{job}"
        shown = f" -c '{json.dumps(conf)}'" if conf else ""
        print(f"\n$ airflow dags test {dag_id}{shown}", flush=True)
        run = self.airflow.dags_test(dag_id, conf)
        for line in run.highlights():
            print(f"    {line}")
        print(f"  -> {run.state}", flush=True)
        if not run.succeeded:
            raise SrmError(f"{dag_id} did not succeed; its full log: airflow dags test {dag_id}{shown}")

    def emit_reverse_heartbeats(self) -> None:
        """One emit task, so the flow's source holds a heartbeat for the replication to carry."""
        dag_id = f"{self.reverse_prefix}.heartbeats"
        print(f"\n$ airflow tasks test {dag_id} emit -t '{{\"duration_seconds\": 2}}'", flush=True)
        self.airflow.airflow("tasks", "test", dag_id, "emit", "-t", json.dumps({"duration_seconds": 2}))
        print("  -> success", flush=True)


def commit_demo_group(config: SrmConfig, flow: Flow) -> dict[int, int]:
    """A group that read half of each partition on the source; its committed offsets."""
    from confluent_kafka import TopicPartition

    consumer = clients.reader(config.cluster(flow.source), DEMO_GROUP)
    try:
        half = {p: count // 2 for p, count in record_counts(consumer, DEMO_TOPIC, DEMO_PARTITIONS).items()}
        consumer.commit(offsets=[TopicPartition(DEMO_TOPIC, p, o) for p, o in half.items()], asynchronous=False)
    finally:
        consumer.close()
    print(f"\n{DEMO_GROUP} committed on {flow.source}: {DEMO_TOPIC} {half}")
    return half


def show_translation(config: SrmConfig, flow: Flow) -> None:
    print(f"\n{DEMO_GROUP}: committed on {flow.source} -> resumes on {flow.target} (exact translation)")
    for t in Translator(config, flow).group(DEMO_GROUP):
        print(f"  {t.from_topic}[{t.partition}] offset {t.from_offset} -> {t.topic}[{t.partition}] offset {t.offset}")
    if flow.settings.sync_group_offsets_enabled:
        found = group_offsets(clients.admin_client(config.cluster(flow.target)), [DEMO_GROUP])[DEMO_GROUP]
        synced = ", ".join(f"{t}[{p}]={o.offset}" for (t, p), o in sorted(found.offsets.items()))
        print(f"  committed in {DEMO_GROUP} on {flow.target} by the group offset sync: {synced or 'nothing yet'}")


def show_clusters(config: SrmConfig) -> None:
    for cluster in config.local_clusters():
        consumer = clients.reader(cluster, "srm-demo-inspector")
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
        consumer = clients.reader(cluster, "srm-demo-inspector")
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
    airflow = DemoAirflow(config, flow)
    try:
        produced = produce_demo_data(source)
        print(
            f"{source.alias}: produced {produced} records to {DEMO_TOPIC}"
            if produced
            else f"{source.alias}: {DEMO_TOPIC} already exists, nothing produced"
        )
        airflow.prepare()
        airflow.dag("maintenance")
        airflow.emit_reverse_heartbeats()
        airflow.dag("replicate", {"mode": "available-now"})
        airflow.dag("heartbeats", {"duration_seconds": 2})
        print()
        show_clusters(config)
        compare(config, flow)
        commit_demo_group(config, flow)
        airflow.dag("checkpoints")
        show_translation(config, flow)
    except SrmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print("\nThe same DAGs in the Airflow UI: make airflow (then http://127.0.0.1:8080)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
