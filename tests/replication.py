"""Test harness for the data path: per-test flows on the session clusters, sequence-numbered data.

Every test gets its own cluster aliases for the same two brokers (``w<token>``/``e<token>``), so
progress groups, transactional ids, internal and remote topics never collide between tests, and
its own warehouse and Spark checkpoint folders.
"""

from __future__ import annotations

import itertools
import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from srm.config import SrmConfig, load_config
from srm.config.model import Cluster, Flow
from srm.kafka import clients
from srm.replication.launch import await_run, start_replication
from srm.storage.warehouse import Warehouse


@dataclass
class Env:
    path: Path
    config: SrmConfig
    tmp: Path
    aliases: dict[str, str]  # "west"/"east" -> this test's alias of that cluster

    @property
    def west(self) -> Cluster:
        return self.config.cluster(self.aliases["west"])

    @property
    def east(self) -> Cluster:
        return self.config.cluster(self.aliases["east"])

    def flow(self, source: str | None = None, target: str | None = None) -> Flow:
        return self.config.flow(source or self.west.alias, target or self.east.alias)

    @property
    def warehouse(self) -> Warehouse:
        return Warehouse(self.config.storage.warehouse)

    def plan_log(self, flow: Flow) -> str:
        return str(self.tmp / "plan-logs" / f"{flow.source}_to_{flow.target}")

    def rewrite(self, **flow_settings: Any) -> None:
        """Change the first flow's settings in the YAML file (a running job picks it up)."""
        data = yaml.safe_load(self.path.read_text())
        data["flows"][0].update(flow_settings)
        self.path.write_text(yaml.safe_dump(data, sort_keys=False))
        self.config = load_config(self.path)


# Every topic the product creates on a single-broker test cluster has one replica.
SINGLE_BROKER = {
    "replication.factor": 1,
    "heartbeats.topic.replication.factor": 1,
    "checkpoints.topic.replication.factor": 1,
    "offset-syncs.topic.replication.factor": 1,
}


def make_env(
    kafka: SrmConfig,
    tmp: Path,
    flows: list[dict[str, Any]],
    *,
    east: str | None = None,
    aliases: tuple[str, str] | None = None,
    monitoring: dict[str, Any] | None = None,
    **defaults: Any,
) -> Env:
    """A config with the session's clusters as ``w<token>`` and ``e<token>`` (or ``aliases``: names
    only one test of the session uses); flows use ``west``/``east``. ``east``: bootstrap servers of
    another cluster to use as ``east``."""
    token = uuid.uuid4().hex[:6]
    west_alias, east_alias = aliases or (f"w{token}", f"e{token}")
    names = {"west": west_alias, "east": east_alias}
    clusters = {
        names[key]: {"bootstrap.servers": cluster.bootstrap_servers}
        for key, cluster in zip(("west", "east"), kafka.clusters[:2], strict=True)
    }
    if east:
        clusters[names["east"]] = {"bootstrap.servers": east}
    data: dict[str, Any] = {
        "defaults": {**SINGLE_BROKER, **defaults},
        "clusters": clusters,
        "flows": [{**f, "source": names[f["source"]], "target": names[f["target"]]} for f in flows],
        "storage": {"warehouse": str(tmp / "warehouse"), "plan_logs": str(tmp / "plan-logs")},
    }
    if monitoring:
        data["monitoring"] = monitoring
    path = tmp / "srm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return Env(path, load_config(path), tmp, names)


def replicate(spark: Any, env: Env, flow: Flow | None = None) -> None:
    """One available-now run of ``flow`` in the test session's Spark."""
    flow = flow or env.flow()
    run = start_replication(spark, env.config, flow, "available-now", plan_log=env.plan_log(flow))
    await_run(run)


def sequenced(partitions: int, count: int, start: int = 0, size: int = 64) -> list[dict[str, Any]]:
    """``count`` records spread over ``partitions``; every 7th has no key, every 11th is a tombstone.

    The sequence number is in the key (``k<seq>``) and a header, so even tombstones carry it.
    Timestamps are distinct and recent (older ones would fall to the brokers' 7-day retention).
    """
    base = int(time.time() * 1000) - 3_600_000
    out = []
    for seq in range(start, start + count):
        key = None if seq % 7 == 3 else f"k{seq}".encode()
        value = None if seq % 11 == 5 else json.dumps({"seq": seq}).encode().ljust(size, b".")
        bare = seq % 5 == 0 and key is not None and value is not None  # some records carry no headers
        headers = None if bare else [("seq", str(seq).encode()), ("origin", b"test")]
        out.append(
            {"key": key, "value": value, "partition": seq % partitions, "headers": headers, "timestamp": base + seq}
        )
    return out


def contents(cluster: Cluster, topic: str) -> dict[int, list[tuple[Any, ...]]]:
    """Per partition, every committed record as (key, value, headers, timestamp), in offset order."""
    from confluent_kafka import TopicPartition

    consumer = clients.reader(cluster, "srm-test-contents")
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        out: dict[int, list[tuple[Any, ...]]] = {}
        for p in partitions:
            consumer.assign([TopicPartition(topic, p, 0)])
            records: list[tuple[Any, ...]] = []
            deadline = time.monotonic() + 10
            while True:
                messages = consumer.consume(10_000, 0.05)
                if time.monotonic() > deadline:
                    raise AssertionError(f"{topic}[{p}] on {cluster.alias}: no end of partition within 10 s")
                ended = False
                for m in messages:
                    if m.error() is not None:
                        ended = ended or m.error().name() == "_PARTITION_EOF"
                        continue
                    records.append((m.key(), m.value(), m.headers(), m.timestamp(), m.offset()))
                if ended:
                    break
            out[p] = records
        return out
    finally:
        consumer.close()


def count_records(cluster: Cluster, topic: str, timeout_s: float = 10.0) -> int:
    """Committed records of ``topic`` (all partitions read at once, up to their ends)."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    consumer = clients.reader(cluster, "srm-test-count")
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics[topic]
        if metadata.error is not None:
            return 0
        waiting = set(metadata.partitions)
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in waiting])
        count, deadline = 0, time.monotonic() + timeout_s
        while waiting and time.monotonic() < deadline:
            for m in consumer.consume(10_000, 0.05):
                if m.error() is None:
                    count += 1
                elif m.error().name() == "_PARTITION_EOF":
                    waiting.discard(m.partition())
        return count
    finally:
        consumer.close()


def without_offsets(parts: dict[int, list[tuple[Any, ...]]]) -> dict[int, list[tuple[Any, ...]]]:
    return {p: [r[:4] for r in records] for p, records in parts.items()}


CLEAN = {"missing": 0, "duplicated": 0, "out_of_order": 0}  # sequence_report of an exact copy


def sequence_report(parts: dict[int, list[tuple[Any, ...]]], expected: dict[int, list[int]]) -> dict[str, int]:
    """Missing, duplicated and out-of-order sequence numbers over all partitions."""
    missing = duplicated = disordered = 0
    for p, wanted in expected.items():
        got = [seq_of(r) for r in parts.get(p, [])]
        missing += len(set(wanted) - set(got))
        duplicated += len(got) - len(set(got))
        disordered += sum(1 for a, b in itertools.pairwise(got) if b < a)
    return {"missing": missing, "duplicated": duplicated, "out_of_order": disordered}


def seq_of(record: tuple[Any, ...]) -> int:
    headers = dict(record[2] or [])
    if "seq" in headers:
        return int(headers["seq"])
    if record[0] is not None:
        return int(record[0][1:])
    return int(json.loads(record[1].rstrip(b"."))["seq"])


def produce_transactions(
    cluster: Cluster, topic: str, batches: list[list[dict[str, Any]]], abort: set[int], transactional_id: str
) -> set[int]:
    """Write each batch in a transaction of its own, aborting the batches whose index is in ``abort``.

    Returns the indexes of the batches that were committed. Now and then the broker answers a
    producer's EndTxn with INVALID_TXN_STATE (confluentinc/librdkafka#4849), a fatal error for that
    producer. A new producer with the same transactional id then fences the old one and aborts what it
    left open, so such a batch counts as aborted unless it can be read back committed from the topic.
    """
    from confluent_kafka import KafkaException

    producer, committed, uncertain = _transactional(cluster, transactional_id), set(), set()
    for index, batch in enumerate(batches):
        try:
            producer.begin_transaction()
            for record in batch:
                producer.produce(topic, **record)
            if index in abort:
                producer.abort_transaction(30)
            else:
                producer.commit_transaction(30)
                committed.add(index)
        except KafkaException as e:
            if not e.args[0].fatal():
                raise
            producer = _transactional(cluster, transactional_id)
            if index not in abort:
                uncertain.add(index)
    if uncertain:
        present = {seq_of(r) for records in contents(cluster, topic).values() for r in records}
        committed |= {i for i in uncertain if seq_of(as_row(batches[i][0])) in present}
    return committed


def _transactional(cluster: Cluster, transactional_id: str) -> Any:
    producer = clients.producer(cluster, **{"transactional.id": transactional_id})
    producer.init_transactions(30)
    return producer


def as_row(record: dict[str, Any]) -> tuple[Any, ...]:
    return (record["key"], record["value"], record["headers"], record["timestamp"])


def shown_status(env: Env) -> dict[str, tuple[str, str]]:
    """The flow's (state, reason) as ``srm-control status --json`` and ``GET /v2/replications`` show it."""
    import json

    from fastapi.testclient import TestClient

    from srm.service.app import create_app
    from tests.helpers import srm_control

    status = srm_control(env.path, "status", "--json")
    assert status.returncode == 0, status.stderr
    [cli] = [f for f in json.loads(status.stdout)["flows"] if f["flow"] == env.flow().name]
    app = create_app(
        env.path, user=lambda: None, groups_reader=lambda: None, paused=lambda _: {}, flow_access=lambda *_: True
    )
    try:
        app.state.monitor.start().wait_round(1)  # the flow as observed after srm-control's look
        response = TestClient(app).get("/v2/replications")
    finally:
        app.state.monitor.stop()
    assert response.status_code == 200, response.text
    [api] = [f for f in response.json()["replications"] if f["flow"] == env.flow().name]
    return {"srm-control": (cli["state"], cli["reason"]), "rest": (api["state"], api["reason"])}
