"""``make demo``: put demo data on the first local source cluster and show every local cluster.

Creates ``demo-orders`` (3 partitions) with 1,000 keyed records carrying headers on the source of
the first enabled flow, once; then prints each local cluster's topics with record counts.
Later issues extend the demo to replicate the data and translate a consumer group's offsets.
"""

from __future__ import annotations

import json
import sys

from srm import clients
from srm.config import load_config
from srm.config.model import Cluster, SrmConfig
from srm.errors import SrmError
from srm.topics import describe, ensure_topic

DEMO_TOPIC = "demo-orders"
DEMO_PARTITIONS = 3
DEMO_RECORDS = 1000


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


def main() -> int:
    config = load_config()
    flows = config.enabled_flows()
    if not flows:
        print("error: the configuration has no enabled flow", file=sys.stderr)
        return 1
    source = config.cluster(flows[0].source)
    try:
        produced = produce_demo_data(source)
        print(
            f"{source.alias}: produced {produced} records to {DEMO_TOPIC}"
            if produced
            else f"{source.alias}: {DEMO_TOPIC} already exists, nothing produced"
        )
        show_clusters(config)
    except SrmError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
