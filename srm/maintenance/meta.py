"""``srm-meta.internal`` on the target: which source topic became which target topic (like SRM's).

Compacted, one record per flow (key ``<source>-><target>``); its latest record lists every topic
pair the flow replicates now, so monitoring can find a remote topic's origin without relying on
prefixes (identity replication).
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from srm.config.model import Cluster, Flow
from srm.errors import SrmError
from srm.kafka import clients
from srm.maintenance.internal import META_TOPIC

log = logging.getLogger(__name__)


def meta_record(flow: Flow, pairs: dict[str, str]) -> dict[str, Any]:
    return {
        "source": flow.source,
        "target": flow.target,
        "pairs": [{"source_topic": s, "target_topic": t} for s, t in sorted(pairs.items())],
        "updated_ms": int(time.time() * 1000),
    }


def write_meta(target: Cluster, flow: Flow, pairs: dict[str, str]) -> None:
    producer = clients.producer(target, **{"enable.idempotence": True})
    value = json.dumps(meta_record(flow, pairs), sort_keys=True).encode()
    producer.produce(META_TOPIC, key=flow.name.encode(), value=value, partition=0)
    if producer.flush(30):
        raise SrmError(f"{META_TOPIC} on {target.alias} did not acknowledge within 30 s")


def read_meta(target: Cluster, flow: Flow) -> dict[str, Any] | None:
    """The latest ``srm-meta.internal`` record of ``flow`` on its target (None: none yet)."""
    from srm.kafka.partitions import read_to_end
    from srm.kafka.topics import partition_counts

    if META_TOPIC not in partition_counts(clients.admin_client(target), include_internal=True):
        return None
    consumer = clients.reader(target, "__srm.meta-reader")
    latest = None
    try:
        for message in read_to_end(consumer, META_TOPIC):
            if message.key() == flow.name.encode():
                latest = message.value()
    finally:
        consumer.close()
    if latest is None:
        return None
    try:
        found: dict[str, Any] = json.loads(latest)
    except ValueError:
        log.error("%s on %s: the latest record of %s is not JSON; ignored", META_TOPIC, target.alias, flow.name)
        return None
    return found


def listed_remote_topics(target: Cluster, flow: Flow) -> set[str]:
    """The remote topics the latest srm-meta record of ``flow`` says it replicates into."""
    meta = read_meta(target, flow) or {}
    return {pair["target_topic"] for pair in meta.get("pairs", []) if isinstance(pair, dict)}
