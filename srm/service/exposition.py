"""Every flow's figures in Prometheus' text format, rendered once per monitor round.

Two sets of names:

- MirrorMaker 2's, as the Prometheus JMX exporter names the ``kafka.connect.mirror`` MBeans with
  the rules Strimzi ships (``kafka_connect_mirror_mirrorsourceconnector_<attribute>`` with labels
  target, topic (the remote topic), partition; ``..._mirrorcheckpointconnector_<attribute>`` with
  source, target, group, topic, partition), so that dashboards and alerts written for MM2 keep
  working. A ``source`` label is added to the source connector's series. The counts are those
  since the monitoring service started, as MM2's are since its task started; rates, record ages and
  replication latencies are those of each partition's newest lease (``task.lease.seconds``).
- This project's own, prefixed ``srm_``: records behind and the age of the oldest record not copied
  per partition (what a failover now would lose), the flow's state, its heartbeat and checkpoint
  ages, records lost, transactions committed and aborted, whether each cluster answers, flows the file cannot parse.

Every series of a flow carries its ``flow`` label ("source->target") on this project's names.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

from srm.health import STATES
from srm.service.monitor import FlowView, Snapshot

MM2_SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
MM2_CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"
SOURCE_LABELS = ["source", "target", "topic", "partition"]
CHECKPOINT_LABELS = ["source", "target", "group", "topic", "partition"]
FLOW_LABELS = ["flow", "source", "target"]
PARTITION_LABELS = [*FLOW_LABELS, "topic", "partition"]


def render(snapshot: Snapshot) -> bytes:
    """The snapshot in Prometheus' text exposition format (version 0.0.4)."""
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(snapshot))
    return bytes(generate_latest(registry))


class _Collector:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot

    def collect(self) -> Iterator[Any]:
        snapshot = self.snapshot
        views = list(snapshot.flows.values())
        yield from _mm2_source(views)
        yield from _mm2_checkpoint(views)
        yield from _partitions(views)
        yield from _flows(views, snapshot.taken_ms)
        yield from _service(snapshot)


def _gauge(name: str, doc: str, labels: list[str]) -> Any:
    from prometheus_client.core import GaugeMetricFamily

    return GaugeMetricFamily(name, doc, labels=labels)


def _counter(name: str, doc: str, labels: list[str]) -> Any:
    from prometheus_client.core import CounterMetricFamily

    return CounterMetricFamily(name, doc, labels=labels)


def _mm2_source(views: Iterable[FlowView]) -> Iterator[Any]:
    doc = "MirrorMaker 2's {} per remote topic partition (the newest lease; counts since the service started)"
    count = {n: _gauge(MM2_SOURCE + n, doc.format(n), SOURCE_LABELS) for n in ("record_count", "byte_count")}
    rate = {n: _gauge(MM2_SOURCE + n, doc.format(n), SOURCE_LABELS) for n in ("record_rate", "byte_rate")}
    stats = {
        f"{m}{k}": _gauge(MM2_SOURCE + f"{m}{k}", doc.format(f"{m}{k}"), SOURCE_LABELS)
        for m in ("record_age_ms", "replication_latency_ms")
        for k in ("", "_min", "_max", "_avg")
    }
    for view in views:
        flow = view.flow
        for copied in view.copied:
            labels = [flow.source, flow.target, copied.remote_topic, str(copied.partition)]
            count["record_count"].add_metric(labels, copied.records)
            count["byte_count"].add_metric(labels, copied.bytes)
        for row in view.leases:
            labels = [flow.source, flow.target, row["target_topic"], str(row["partition"])]
            seconds = max(0.001, (row["finished_at"] - row["started_at"]).total_seconds())
            rate["record_rate"].add_metric(labels, row["records"] / seconds)
            rate["byte_rate"].add_metric(labels, row["bytes"] / seconds)
            for metric, column in (("record_age_ms", "record_age"), ("replication_latency_ms", "latency")):
                if row[f"{column}_avg_ms"] is None:  # a lease that copied nothing has no ages
                    continue
                stats[metric].add_metric(labels, row[f"{column}_avg_ms"])
                for k in ("min", "max", "avg"):
                    stats[f"{metric}_{k}"].add_metric(labels, row[f"{column}_{k}_ms"])
    yield from count.values()
    yield from rate.values()
    yield from stats.values()


def _mm2_checkpoint(views: Iterable[FlowView]) -> Iterator[Any]:
    doc = "MirrorMaker 2's checkpoint-latency-ms{} per group and remote topic partition (passes of the last 10 minutes)"
    names = {"": "latency_ms", "_min": "min", "_max": "max", "_avg": "avg"}
    found = {k: _gauge(f"{MM2_CHECKPOINT}checkpoint_latency_ms{k}", doc.format(k), CHECKPOINT_LABELS) for k in names}
    for view in views:
        for row in view.checkpoints:
            labels = [view.flow.source, view.flow.target, row["group"], row["topic"], str(row["partition"])]
            for suffix, column in names.items():
                found[suffix].add_metric(labels, row[column])
    yield from found.values()


def _partitions(views: Iterable[FlowView]) -> Iterator[Any]:
    lag = _gauge("srm_replication_records_lag", "Records of the source partition not copied yet", PARTITION_LABELS)
    age = _gauge(
        "srm_replication_oldest_record_age_seconds",
        "Age of the oldest record of the source partition not copied yet: what a failover now would lose "
        "(0 when nothing is behind; absent while it has not been read)",
        PARTITION_LABELS,
    )
    lost = _counter("srm_data_loss_records", "Source records gone before they could be copied", PARTITION_LABELS)
    txns = _counter(
        "srm_replication_transactions", "Transactions committed with the partition's records", PARTITION_LABELS
    )
    aborted = _counter(
        "srm_replication_transactions_aborted",
        "Transactions holding the partition's records that were aborted (their records copied again)",
        PARTITION_LABELS,
    )
    now = time.time() * 1000
    for view in views:
        flow = view.flow
        base = [flow.name, flow.source, flow.target]
        for figures in view.partitions:
            labels = [*base, figures.topic, str(figures.partition)]
            lag.add_metric(labels, figures.lag)
            if figures.lag == 0:
                age.add_metric(labels, 0.0)
            elif figures.oldest_ms is not None:
                age.add_metric(labels, max(0.0, (now - figures.oldest_ms) / 1000))
        # Every partition has a count, 0 without a loss: increase() sees the first loss.
        losses = {(figures.topic, figures.partition): 0 for figures in view.partitions}
        losses.update({(topic, partition): records for topic, partition, records in view.lost})
        for (topic, partition), records in sorted(losses.items()):
            lost.add_metric([*base, topic, str(partition)], records)
        for copied in view.copied:
            labels = [*base, copied.topic, str(copied.partition)]
            txns.add_metric(labels, copied.transactions)
            aborted.add_metric(labels, copied.aborted)
    yield from (lag, age, lost, txns, aborted)


def _flows(views: Iterable[FlowView], now_ms: int) -> Iterator[Any]:
    state = _gauge("srm_flow_state", "1 for the flow's current state, 0 for the others", [*FLOW_LABELS, "state"])
    beat = _gauge("srm_heartbeat_age_seconds", "Age of the newest heartbeat the flow replicated", FLOW_LABELS)
    checkpoint = _gauge("srm_checkpoint_age_seconds", "Age of the flow's newest checkpoint", FLOW_LABELS)
    observed = _gauge(
        "srm_flow_observation_age_seconds", "How old the flow's figures are (observed every 10 s)", FLOW_LABELS
    )
    for view in views:
        labels = [view.flow.name, view.flow.source, view.flow.target]
        for name in STATES:
            state.add_metric([*labels, name], 1.0 if view.health.state == name else 0.0)
        if view.health.heartbeat_age_s is not None:
            beat.add_metric(labels, view.health.heartbeat_age_s)
        if view.health.checkpoint_age_s is not None:
            checkpoint.add_metric(labels, view.health.checkpoint_age_s)
        if view.observed_ms:
            observed.add_metric(labels, max(0.0, (now_ms - view.observed_ms) / 1000))
    yield from (state, beat, checkpoint, observed)


def _service(snapshot: Snapshot) -> Iterator[Any]:
    reachable = _gauge("srm_cluster_reachable", "1 when the cluster answered the monitor's last probe", ["cluster"])
    for alias, cluster in sorted(snapshot.clusters.items()):
        reachable.add_metric([alias], 1.0 if cluster.reachable else 0.0)
    invalid = _gauge("srm_flow_invalid", "1 for a flow of the configuration file that does not parse", ["flow"])
    for broken in snapshot.broken:
        invalid.add_metric([broken.name], 1.0)
    usable = _gauge("srm_config_usable", "1 when the configuration file can be used", [])
    usable.add_metric([], 0.0 if snapshot.problem else 1.0)
    yield from (reachable, invalid, usable)
