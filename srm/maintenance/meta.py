"""``srm-meta.internal`` on the target: which source topic became which target topic (like SRM's).

Compacted, one record per flow (key ``<source>-><target>``); its latest record lists every topic
pair the flow replicates now, so monitoring can find a remote topic's origin without relying on
prefixes (identity replication).
"""

from __future__ import annotations

import json
import time
from typing import Any

from srm import clients
from srm.config.model import Cluster, Flow
from srm.errors import SrmError
from srm.maintenance.internal import META_TOPIC


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
