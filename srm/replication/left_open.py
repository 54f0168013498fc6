"""Transactions of a flow's fenced copy producers that Kafka left open on a partition of the target.

A coordinator that finds a partition without a leader while it writes a transaction's markers skips
that partition's marker (:mod:`srm.kafka.transactions`). A read of the flow's progress or history
topic held by such a transaction ends it (:func:`srm.replication.ownership.end_hanging_transactions`),
but a transaction that failed before its commit wrote nothing there: left open on a remote topic
alone, no read of the flow's finds it. A new epoch's claim ends those of the producers it fenced.
"""

from __future__ import annotations

import logging
from typing import Any

from srm.config.model import Cluster, Flow
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.hanging import end_left_open
from srm.kafka.internal_topics import flow_internal_topics
from srm.kafka.topics import partition_counts
from srm.replication.kafka_errors import transactional_prefix

log = logging.getLogger("srm.replicate")


def end_fenced_left_open(target: Cluster, flow: Flow, fenced: list[str]) -> None:
    """End what the copy producers of ``fenced`` (earlier epochs', fenced just now) left open on any
    partition of the target (:func:`srm.kafka.hanging.end_left_open`). A transaction that failed
    before its commit wrote nothing to the progress or history topic, so no held read of those finds
    it; left open on a remote topic, it held that partition's read_committed readers for good once
    this epoch's producers copied on there. A one-node target frozen past the flow's
    errors.retry.timeout does it: at the thaw its controller fences the node for a moment (the
    node's session ran out while it was stopped), and a transaction its coordinator completes then
    finds every partition without a leader. A lookup that fails leaves the claim as it is."""
    if not fenced:
        return
    admin = clients.admin_client(target)
    consumer = clients.reader(target, "__srm.owners")
    try:
        prefix = transactional_prefix(flow.source, flow.target)
        end_left_open(target, admin, consumer, flow_partitions(admin, flow), ids=fenced, prefix=prefix)
    except SrmError as exc:
        log.warning("flow %s: transactions the earlier epochs left open were not looked for: %s", flow.name, exc)
    finally:
        consumer.close()


def flow_partitions(admin: Any, flow: Flow) -> list[tuple[str, int]]:
    """The partitions of the target a copy transaction of ``flow`` may write: its remote topics (all
    topics under a prefixless policy) and its internal topics there, as the target has them now."""
    internal = {topic.name for topic in flow_internal_topics(flow) if topic.cluster == flow.target}
    return [
        (name, number)
        for name, count in partition_counts(admin).items()
        if name in internal or flow.policy.topic_source(name) == flow.source
        for number in range(count)
    ]
