"""Every flow's figures in Prometheus' text format, rendered once per monitor round.

Two sets of names:

- MirrorMaker 2's, as the Prometheus JMX exporter names the ``kafka.connect.mirror`` MBeans with
  the rules Strimzi ships (``kafka_connect_mirror_mirrorsourceconnector_<attribute>`` with labels
  target, topic (the remote topic), partition; ``..._mirrorcheckpointconnector_<attribute>`` with
  source, target, group, topic, partition), so that dashboards and alerts written for MM2 keep
  working. A ``source`` label is added to the source connector's series. The counts are those
  since the monitoring service started, as MM2's are since its task started; rates, record ages and
  replication latencies are those of each partition's current lease so far (the copiers' statuses,
  srm.replication.status, at most STATUS_EVERY_S plus a round old; then the lease's row).
- This project's own, prefixed ``srm_``: records behind and the age of the oldest record not copied
  per partition (what a failover now would lose), the flow's state, its heartbeat and checkpoint
  ages, records lost, transactions committed and aborted, whether each cluster answers, flows the file cannot parse.

Every series of a flow carries its ``flow`` label ("source->target") on this project's names.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Iterator

from srm.operations.health import STATES
from srm.service.snapshot import FlowView, Snapshot

MM2_SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
MM2_CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"
SOURCE_LABELS = ["source", "target", "topic", "partition"]
CHECKPOINT_LABELS = ["source", "target", "group", "topic", "partition"]
FLOW_LABELS = ["flow", "source", "target"]
PARTITION_LABELS = [*FLOW_LABELS, "topic", "partition"]


def render(snapshot: Snapshot) -> bytes:
    """The snapshot in Prometheus' text exposition format (version 0.0.4, as prometheus_client writes
    it: label names sorted, values as Python floats). Written here rather than by prometheus_client's
    generate_latest, which took 3.0 s a round for 10,000 partitions (170,000 series, bench.monitoring):
    the label set of a partition is formatted once for all of its series."""
    labels: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
    views = list(snapshot.flows.values())
    families = [
        *_mm2_source(views, labels),
        *_mm2_checkpoint(views, labels),
        *_partitions(views, labels),
        *_flows(views, snapshot.taken_ms, labels),
        *_service(snapshot, labels),
    ]
    return "".join(part for family in families for part in (family.header, *family.lines)).encode()


LabelCache = dict[tuple[tuple[str, ...], tuple[str, ...]], str]


class _Family:
    """One metric family: its HELP and TYPE lines and its samples, each a line."""

    def __init__(self, name: str, doc: str, kind: str, labels: list[str], cache: LabelCache) -> None:
        self.name = f"{name}_total" if kind == "counter" else name
        help_text = doc.replace("\\", "\\\\").replace("\n", "\\n")
        self.header = f"# HELP {self.name} {help_text}\n# TYPE {self.name} {kind}\n"
        self.labels = tuple(labels)
        self.order = sorted(range(len(labels)), key=lambda i: labels[i])
        self.cache = cache
        self.lines: list[str] = []

    def add_metric(self, values: list[str], value: float) -> None:
        key = (self.labels, tuple(values))
        text = self.cache.get(key)
        if text is None:
            pairs = ",".join(f'{self.labels[i]}="{_escape(values[i])}"' for i in self.order)
            text = self.cache[key] = f"{{{pairs}}}" if pairs else ""
        self.lines.append(f"{self.name}{text} {_number(value)}\n")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(value: float) -> str:
    number = float(value)
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return repr(number)


def _gauge(name: str, doc: str, labels: list[str], cache: LabelCache) -> _Family:
    return _Family(name, doc, "gauge", labels, cache)


def _counter(name: str, doc: str, labels: list[str], cache: LabelCache) -> _Family:
    return _Family(name, doc, "counter", labels, cache)


def _mm2_source(views: Iterable[FlowView], cache: LabelCache) -> Iterator[_Family]:
    doc = "MirrorMaker 2's {} per remote topic partition (the current lease so far; counts since the service started)"
    count = {n: _gauge(MM2_SOURCE + n, doc.format(n), SOURCE_LABELS, cache) for n in ("record_count", "byte_count")}
    rate = {n: _gauge(MM2_SOURCE + n, doc.format(n), SOURCE_LABELS, cache) for n in ("record_rate", "byte_rate")}
    stats = {
        f"{m}{k}": _gauge(MM2_SOURCE + f"{m}{k}", doc.format(f"{m}{k}"), SOURCE_LABELS, cache)
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


def _mm2_checkpoint(views: Iterable[FlowView], cache: LabelCache) -> Iterator[_Family]:
    doc = "MirrorMaker 2's checkpoint-latency-ms{} per group and remote topic partition (passes of the last 10 minutes)"
    names = {"": "latency_ms", "_min": "min", "_max": "max", "_avg": "avg"}
    found = {
        k: _gauge(f"{MM2_CHECKPOINT}checkpoint_latency_ms{k}", doc.format(k), CHECKPOINT_LABELS, cache) for k in names
    }
    for view in views:
        for row in view.checkpoints:
            labels = [view.flow.source, view.flow.target, row["group"], row["topic"], str(row["partition"])]
            for suffix, column in names.items():
                found[suffix].add_metric(labels, row[column])
    yield from found.values()


def _partitions(views: Iterable[FlowView], cache: LabelCache) -> Iterator[_Family]:
    lag = _gauge(
        "srm_replication_records_lag", "Records of the source partition not copied yet", PARTITION_LABELS, cache
    )
    age = _gauge(
        "srm_replication_oldest_record_age_seconds",
        "Age of the oldest record of the source partition not copied yet: what a failover now would lose "
        "(0 when nothing is behind; absent while it has not been read)",
        PARTITION_LABELS,
        cache,
    )
    lost = _counter("srm_data_loss_records", "Source records gone before they could be copied", PARTITION_LABELS, cache)
    txns = _counter(
        "srm_replication_transactions", "Transactions committed with the partition's records", PARTITION_LABELS, cache
    )
    aborted = _counter(
        "srm_replication_transactions_aborted",
        "Transactions holding the partition's records that were aborted (their records copied again)",
        PARTITION_LABELS,
        cache,
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


def _flows(views: Iterable[FlowView], now_ms: int, cache: LabelCache) -> Iterator[_Family]:
    state = _gauge("srm_flow_state", "1 for the flow's current state, 0 for the others", [*FLOW_LABELS, "state"], cache)
    beat = _gauge("srm_heartbeat_age_seconds", "Age of the newest heartbeat the flow replicated", FLOW_LABELS, cache)
    checkpoint = _gauge("srm_checkpoint_age_seconds", "Age of the flow's newest checkpoint", FLOW_LABELS, cache)
    observed = _gauge(
        "srm_flow_observation_age_seconds", "How old the flow's figures are (observed every 10 s)", FLOW_LABELS, cache
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


def _service(snapshot: Snapshot, cache: LabelCache) -> Iterator[_Family]:
    reachable = _gauge(
        "srm_cluster_reachable", "1 when the cluster answered the monitor's last probe", ["cluster"], cache
    )
    for alias, cluster in sorted(snapshot.clusters.items()):
        reachable.add_metric([alias], 1.0 if cluster.reachable else 0.0)
    invalid = _gauge("srm_flow_invalid", "1 for a flow of the configuration file that does not parse", ["flow"], cache)
    for broken in snapshot.broken:
        invalid.add_metric([broken.name], 1.0)
    usable = _gauge("srm_config_usable", "1 when the configuration file can be used", [], cache)
    usable.add_metric([], 0.0 if snapshot.problem else 1.0)
    yield from (reachable, invalid, usable)
