"""Transactions Kafka leaves open on a partition for good, and how the flow's producers end them.

A transaction coordinator that finds a partition without a leader while it writes a transaction's
markers skips that partition's marker ("likely deleted already"). On a cluster of two nodes this
happens at will: the coordinator on node 1, the partitions on node 2 alone, node 2 killed before
the commit (or abort). After node 2 is back, those partitions' last stable offset stays below their
end: read_committed readers never get past it. ``srm.kafka.hanging.end_hanging`` ends each one
as its coordinator decided it, with no record of its own: the committed record becomes readable, the
aborted one never does.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from srm.config.model import Cluster, Flow, LocalBroker
from srm.config.settings import FlowSettings
from srm.devenv.jvm import kafka_command
from srm.devenv.local import LocalKafka
from srm.kafka import clients
from srm.kafka.hanging import end_hanging
from srm.kafka.internal_topics import OWNERS_TOPIC, history_topic_name, progress_topic_name
from srm.kafka.partitions import list_offsets
from srm.mm2.records import ProgressRecord
from srm.replication.job import CopyJob, copy_transactional_ids
from srm.replication.kafka_errors import transactional_prefix
from srm.replication.ownership import FlowOwner, end_hanging_transactions, fence_others
from srm.replication.progress import Progress, read_flow_progress
from tests.conftest import free_ports

pytestmark = pytest.mark.integration

PREFIX = "srm-replicate.hang-src.hang-dst."
TOPIC = "srm-offset-syncs.hang-src.internal"  # on node 2 alone
HOST = "127.0.0.1"


class TwoNodes:
    """Node 1: controller and broker, with the one partition of __transaction_state. Node 2: a broker
    formatted with node 1's cluster id."""

    def __init__(self, base: Path) -> None:
        p1, c1, p2, c2 = free_ports(4)
        one = {"transaction.state.log.num.partitions": "1", "controlled.shutdown.enable": "false"}
        self.node1 = LocalKafka("hang-1", LocalBroker(host=HOST, port=p1, controller_port=c1, server=one), base)
        two = {
            **one,
            "node.id": "2",
            "process.roles": "broker",
            "controller.quorum.voters": f"1@{HOST}:{c1}",
            "listeners": f"PLAINTEXT://{HOST}:{p2}",
        }
        self.node2 = LocalKafka("hang-2", LocalBroker(host=HOST, port=p2, controller_port=c2, server=two), base)
        self.cluster = Cluster(alias="hang", bootstrap_servers=f"{HOST}:{p1},{HOST}:{p2}")

    def start_node2(self) -> None:
        node = self.node2
        if not (node.data / "meta.properties").exists():  # formatted into node 1's cluster
            node.logs.mkdir(parents=True, exist_ok=True)
            node.properties.write_text("".join(f"{k}={v}\n" for k, v in node.server_properties().items()))
            cluster_id = _meta(self.node1.data)["cluster.id"]
            format_ = kafka_command("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(node.properties))
            subprocess.run(format_, check=True, capture_output=True, timeout=120)
        node.pidfile.unlink(missing_ok=True)
        node.start()
        node.wait_until_answering(time.monotonic() + 120)

    def kill_node2(self) -> None:
        pid = self.node2.pid()
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)

    def leaders(self, admin: Any, topic: str) -> dict[int, int]:
        described = admin.list_topics(topic, timeout=10).topics[topic]
        return {number: p.leader for number, p in described.partitions.items()}


def _meta(data: Path) -> dict[str, str]:
    lines = (data / "meta.properties").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[TwoNodes]:
    cluster = TwoNodes(tmp_path)
    cluster.node1.start()
    try:
        cluster.node1.wait_until_answering(time.monotonic() + 120)
        yield cluster
    finally:
        cluster.node2.stop()
        cluster.node1.stop()


def wait_for(what: str, check: Any, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s:.0f} s"
        time.sleep(0.2)


def read_committed(cluster: Cluster, topic: str, partition: int) -> list[Any]:
    from srm.kafka.partitions import read_to_end

    consumer = clients.reader(cluster, "__srm.test-hanging")
    try:
        return list(read_to_end(consumer, topic, partition, 30.0))
    finally:
        consumer.close()


def leave_open(nodes: TwoNodes, admin: Any, topic: str, writes: list[tuple[Any, int, bytes, bytes, str]]) -> None:
    """``topic`` of 2 partitions on node 2 alone; each write (producer, partition, key, value, "commit" or
    "abort") in a transaction of its producer, decided while node 2 is down: Kafka skips their markers."""
    from confluent_kafka.admin import NewTopic

    nodes.start_node2()
    admin.create_topics([NewTopic(topic, 2, replica_assignment=[[2], [2]])])[topic].result(30)
    wait_for("both partitions led by node 2", lambda: nodes.leaders(admin, topic) == {0: 2, 1: 2})
    for producer, partition, key, value, _ in writes:
        producer.begin_transaction()
        producer.produce(topic, partition=partition, key=key, value=value)
        assert producer.flush(30) == 0
    nodes.kill_node2()
    wait_for("node 2 fenced, its partitions without a leader", lambda: nodes.leaders(admin, topic) == {0: -1, 1: -1})
    for producer, *_, outcome in writes:  # the coordinator decides, skips the markers, completes
        producer.commit_transaction(60) if outcome == "commit" else producer.abort_transaction(60)
    for partition in sorted({w[1] for w in writes}):  # Kafka's part: after the reply, it skips their markers
        skipped = f"Couldn't find leader endpoint for partitions Set({topic}-{partition})"
        wait_for(skipped, lambda line=skipped: line in (nodes.node1.logs / "server.log").read_text(), 30)
    nodes.start_node2()
    wait_for("node 2 leads its partitions again", lambda: nodes.leaders(admin, topic) == {0: 2, 1: 2})
    keys = [(topic, w[1]) for w in writes]
    ends = list_offsets(admin, keys, "latest", read_committed=False)
    assert ends == dict.fromkeys(keys, 1)
    time.sleep(3)  # Kafka's part: the transactions stay open on their partitions
    assert list_offsets(admin, keys, "latest") == dict.fromkeys(keys, 0)


def test_transactions_left_open_by_skipped_markers_are_ended_as_decided(nodes: TwoNodes) -> None:
    cluster = nodes.cluster
    admin = clients.admin_client(cluster)
    committer = clients.producer(cluster, **{"transactional.id": PREFIX + "3.0"})
    aborter = clients.producer(cluster, **{"transactional.id": PREFIX + "3.0.alt"})
    for producer in (committer, aborter):  # __transaction_state, its one partition on node 1
        producer.init_transactions(60)
    leave_open(
        nodes, admin, TOPIC, [(committer, 0, b"k", b"committed", "commit"), (aborter, 1, b"k", b"aborted", "abort")]
    )

    consumer = clients.reader(cluster, "__srm.test-hanging")
    try:
        # a live producer is spared: its next transaction there ends what it left open
        assert end_hanging(cluster, admin, consumer, (TOPIC, 0), PREFIX, spare={PREFIX + "3.0"}) == []
        assert list_offsets(admin, [(TOPIC, 0)], "latest")[(TOPIC, 0)] == 0
        ended = end_hanging(cluster, admin, consumer, (TOPIC, 0), PREFIX)
        assert [(o.transactional_id, o.result) for o in ended] == [(PREFIX + "3.0", "commit")]
        ended = end_hanging(cluster, admin, consumer, (TOPIC, 1), PREFIX)
        assert [(o.transactional_id, o.result) for o in ended] == [(PREFIX + "3.0.alt", "abort")]
        assert end_hanging(cluster, admin, consumer, (TOPIC, 0), PREFIX) == []  # nothing held any more
    finally:
        consumer.close()

    # Nothing open on either: each holds its record and the marker that ended it, the marker written
    # once the coordinator has answered EndTxn (so a partition's end is read with its stable offset,
    # not before: the marker moves both).
    keys = [(TOPIC, 0), (TOPIC, 1)]
    ended_both = dict.fromkeys(keys, 2)
    wait_for("both partitions stable at their end", lambda: list_offsets(admin, keys, "latest") == ended_both, 30)
    assert list_offsets(admin, keys, "latest", read_committed=False) == ended_both
    assert [m.value() for m in read_committed(cluster, TOPIC, 0)] == [b"committed"]  # and no record of ours
    assert read_committed(cluster, TOPIC, 1) == []  # the aborted record never shows
    for producer in (committer, aborter):
        clients.abandon_producer(producer)  # fenced by the ends above


def test_a_progress_read_held_by_a_transaction_left_open_ends_it(nodes: TwoNodes) -> None:
    """A copier's (or a plan's) read of the flow's progress, held by a transaction an earlier epoch's
    copy slot left open, ends it after 10 s and reads the progress it committed."""
    from confluent_kafka.admin import NewTopic

    flow = Flow(source="hang-src", target="hang-dst", settings=FlowSettings())
    progress = progress_topic_name(flow)
    assert progress.startswith("srm-offsets.hang-src") and transactional_prefix(flow.source, flow.target) == PREFIX
    cluster = nodes.cluster
    admin = clients.admin_client(cluster)
    admin.create_topics([NewTopic(OWNERS_TOPIC, 1, 1)])[OWNERS_TOPIC].result(30)  # no run of the flow yet
    copier = clients.producer(cluster, **{"transactional.id": PREFIX + "1.0"})  # epoch 1, slot 0
    copier.init_transactions(60)
    record = ProgressRecord("orders", 0, "", 1234)
    leave_open(nodes, admin, progress, [(copier, 0, record.key(), record.value(), "commit")])

    started = time.monotonic()
    found = read_flow_progress(cluster, flow, [("orders", 0)], admin)
    assert found == {("orders", 0): Progress(1234, "")}
    assert time.monotonic() - started < 60  # held 10 s, then ended; the read's own wait is 120 s and more
    key = (progress, 0)  # nothing open any more: the record, then the marker that ended it
    assert (
        list_offsets(admin, [key], "latest") == list_offsets(admin, [key], "latest", read_committed=False) == {key: 2}
    )
    clients.abandon_producer(copier)


def test_a_copier_held_by_its_own_epochs_transaction_left_open_ends_it(nodes: TwoNodes) -> None:
    """As in bench.soak after the target was frozen for 60 s: its coordinator aborted a copier's
    timed-out transaction while the progress partition had no leader and skipped its marker. The
    epoch still runs, so a read that spares live copiers' ids leaves it open, and the slot's next
    copier, whose read of the progress it holds, never gets to the transaction that would end it.
    That copier's read (``fence_others``) ends it: its own epoch's ids are not spared."""
    from confluent_kafka.admin import NewTopic

    flow = Flow(source="hang-src", target="hang-dst", settings=FlowSettings())
    progress = progress_topic_name(flow)
    cluster = nodes.cluster
    admin = clients.admin_client(cluster)
    admin.create_topics([NewTopic(OWNERS_TOPIC, 1, 1)])[OWNERS_TOPIC].result(30)
    owner = FlowOwner(cluster, flow, "the soak's run")
    epoch = owner.claim(1, "continuous").epoch  # running: its slot's ids are live
    earlier = clients.producer(cluster, **{"transactional.id": copy_transactional_ids(flow, epoch, 0)[1]})
    earlier.init_transactions(60)
    record = ProgressRecord("orders", 0, "", 1234)
    leave_open(nodes, admin, progress, [(earlier, 0, record.key(), record.value(), "abort")])

    key = (progress, 0)
    end_hanging_transactions(cluster, flow)  # a read of the driver: a live slot's transaction is spared
    assert list_offsets(admin, [key], "latest") == {key: 0}
    job = CopyJob(flow, cluster, cluster, 0, (), history_topic_name(flow), progress, epoch, owner.run, 0, slots=1)
    fence_others(job)  # the slot's next copier, held
    ended = {key: 2}  # the record and the marker that ended it
    wait_for("the progress stable at its end", lambda: list_offsets(admin, [key], "latest") == ended, 30)
    assert list_offsets(admin, [key], "latest", read_committed=False) == ended
    assert read_flow_progress(cluster, flow, [("orders", 0)], admin) == {}  # aborted, as its coordinator decided
    clients.abandon_producer(earlier)
    owner.close()


def test_a_new_epoch_ends_what_the_fenced_epoch_left_open_on_a_remote_topic(
    nodes: TwoNodes, caplog: pytest.LogCaptureFixture
) -> None:
    """As after a one-node target frozen past a flow's errors.retry.timeout: a copier's transaction
    failed before its commit (nothing on the progress topic), and its coordinator decided it while
    the remote topic's partitions had no leader and skipped their markers. The next run's epoch
    copies on there with other producers, whose records read_committed readers would never reach;
    its claim, which fences the earlier epoch, ends that epoch's transactions left open as their
    coordinator decided them."""
    from confluent_kafka.admin import NewTopic

    flow = Flow(source="hang-src", target="hang-dst", settings=FlowSettings())
    remote = flow.policy.format_remote_topic(flow.source, "orders")
    cluster = nodes.cluster
    admin = clients.admin_client(cluster)
    admin.create_topics([NewTopic(OWNERS_TOPIC, 1, 1)])[OWNERS_TOPIC].result(30)
    first = FlowOwner(cluster, flow, "the frozen run")
    epoch = first.claim(1, "available-now").epoch
    copier, alt = (clients.producer(cluster, **{"transactional.id": i}) for i in copy_transactional_ids(flow, epoch, 0))
    for producer in (copier, alt):
        producer.init_transactions(60)
    leave_open(nodes, admin, remote, [(copier, 0, b"k", b"committed", "commit"), (alt, 1, b"k", b"aborted", "abort")])

    caplog.set_level("WARNING")
    FlowOwner(cluster, flow, "the next run").claim(1, "available-now")  # takes over, fences epoch 1
    keys = [(remote, 0), (remote, 1)]
    ended = dict.fromkeys(keys, 2)  # each record, then the marker that ended it
    wait_for("both partitions stable at their end", lambda: list_offsets(admin, keys, "latest") == ended, 30)
    assert list_offsets(admin, keys, "latest", read_committed=False) == ended
    assert [m.value() for m in read_committed(cluster, remote, 0)] == [b"committed"]  # as decided
    assert read_committed(cluster, remote, 1) == []
    said = [r.getMessage() for r in caplog.records if "left open there" in r.getMessage()]
    assert len(said) == 2 and all(f"{remote}[" in m for m in said), said
    for producer in (copier, alt):
        clients.abandon_producer(producer)
    first.close()
