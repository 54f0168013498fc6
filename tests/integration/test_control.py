"""srm-control against the real clusters: live lists, offsets export for Kafka's own tool, failover, errors."""

from __future__ import annotations

import logging
import re
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from srm.config import SrmConfig, load_config
from srm.devenv.jvm import kafka_command
from srm.devenv.local import LocalClusters
from srm.kafka import clients
from srm.kafka.control_lists import ControlReader, Lists, write_lists
from srm.kafka.partitions import read_to_end
from srm.kafka.topics import ensure_topic, partition_counts
from srm.offsets.checkpoint_store import read_checkpoints
from srm.offsets.checkpointing import CheckpointPass
from srm.replication.launch import start_replication
from srm.replication.lease import PlanWatcher
from srm.replication.selector import TopicSelector
from tests.checkpointing import active_member, commit, committed_on, read_from
from tests.conftest import Run, free_ports
from tests.helpers import produce
from tests.integration.test_replicate_continuous import FLOW_WITHIN_S, target_records, wait_for
from tests.replication import SINGLE_BROKER, Env, contents, make_env, replicate, sequenced

pytestmark = pytest.mark.integration


@pytest.fixture
def driver_lines(caplog: pytest.LogCaptureFixture) -> None:
    """The run's INFO lines kept: a miss shows the driver's lease lines (which change it saw, when)."""
    caplog.set_level(logging.INFO, logger="srm")


@pytest.mark.usefixtures("driver_lines")
def test_topic_lists_change_a_running_flow_within_seconds(
    spark: Any, kafka: SrmConfig, tmp_path: Path, cli: Run, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = f"ctl-{uuid.uuid4().hex[:8]}"
    warm, late = f"{prefix}-warm", f"{prefix}-late"
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [], "topics.exclude": []}])
    flow_args = ("--source", env.west.alias, "--target", env.east.alias)
    admin = clients.admin_client(env.west)
    for topic in (warm, late):
        ensure_topic(admin, topic, 2)
        produce(env.west, topic, sequenced(2, 100))
    run = start_replication(spark, env.config, env.flow(), "continuous", plan_log=env.plan_log(env.flow()))
    try:
        assert cli(env.path, "topics", *flow_args, "--add", warm)[0] == 0
        wait_for(lambda: target_records(env, warm) == 100, 60, "the first micro-batch")  # starts Python workers
        assert target_records(env, late) == 0  # not on the list: not replicated

        code, out, _ = cli(env.path, "topics", *flow_args, "--add", late)
        assert code == 0 and out == f"Current whitelist:\n{warm}\n{late}\nCurrent blacklist:\nDone.\n"
        took = wait_for(lambda: target_records(env, late) == 100, FLOW_WITHIN_S, f"{late} after --add")
        with capsys.disabled():
            print(f"\n--add applied in {took:.1f} s")

        code, out, _ = cli(env.path, "topics", *flow_args, "--add-blacklist", late)
        assert code == 0
        time.sleep(FLOW_WITHIN_S)
        produce(env.west, late, sequenced(2, 50, start=100))
        produce(env.west, warm, sequenced(2, 50, start=100))
        wait_for(lambda: target_records(env, warm) == 150, FLOW_WITHIN_S, "records of the allowed topic")
        assert target_records(env, late) == 100  # denied: the new records stay on the source

        code, out, _ = cli(env.path, "topics", *flow_args, "--list")
        assert code == 0
        assert out == f"Current whitelist:\n{warm}\n{late}\nCurrent blacklist:\n{late}\nDone.\n"  # SRM's format
    finally:
        run.stop()


def test_a_lease_starts_watching_with_the_lists_its_plan_was_made_with(kafka: SrmConfig, tmp_path: Path) -> None:
    """The planner reads srm-control's lists at every trigger; the driver's watcher looks for their
    topic at most every RECHECK_S while it does not exist. A lease planned with a list edited since
    the watcher's last look (the flow's first edit) starts with the watcher reading it too: neither
    ended at once for partitions the watcher does not know, nor blind to the next edit."""
    prefix = f"ctl-{uuid.uuid4().hex[:8]}"
    listed, added = f"{prefix}-listed", f"{prefix}-added"
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [], "topics.exclude": []}])
    flow = env.flow()
    source_admin = clients.admin_client(env.west)
    ensure_topic(source_admin, listed, 2)
    ensure_topic(source_admin, added, 1)
    watcher = PlanWatcher(flow, env.config, source_admin)
    watcher.control.close()
    watcher.control = ControlReader(env.east, _next_check=time.monotonic() + 3600)  # it looked just now
    try:
        write_lists(env.east, flow, "topics", Lists((listed,), ()))
        selector = TopicSelector(flow, (listed,))  # what the planner makes of the lists
        counts = partition_counts(source_admin)
        planned = {(t, p) for t, n in counts.items() if selector.replicates(t) for p in range(n)}
        assert (listed, 1) in planned
        watcher.expect(flow, planned)
        assert watcher.change() is None

        write_lists(env.east, flow, "topics", Lists((listed, added), ()))
        changes: list[str | None] = []
        wait_for(lambda: changes.append(watcher.change()) or changes[-1] is not None, 5, "the edit seen")
        assert changes[-1] == f"1 new and 0 removed partition(s): {added}[0]"
    finally:
        watcher.close()


def test_a_reader_kept_at_the_end_reads_each_record_written_as_it_gets_there(kafka: SrmConfig) -> None:
    """How a running flow's driver reads srm-control's lists: to the end, then on from there. A
    record fetched right after the end, in the batch that brought it, is read too: skipped, the
    edit it holds would never reach the running flow (nor end its lease)."""
    east = kafka.clusters[1]
    topic = f"ctl-reader-{uuid.uuid4().hex[:8]}"
    ensure_topic(clients.admin_client(east), topic, 1)
    producer = clients.producer(east)
    writing = threading.Event()

    def write() -> None:  # a record every 30 ms: the reader keeps reaching the end between two
        while writing.is_set():
            producer.produce(topic, value=b"lists", partition=0)
            producer.flush(10)
            time.sleep(0.03)

    for _ in range(3):
        reader = clients.reader(east, "__srm.test-reader")
        writing.set()
        writer = threading.Thread(target=write)
        writer.start()
        try:
            read = [m.offset() for m in read_to_end(reader, topic, 0, keep_assigned=True)]
            until = time.monotonic() + 1.0
            while time.monotonic() < until:
                read += [m.offset() for m in reader.consume(1000, 0.01) if m.error() is None]
        finally:
            writing.clear()
            writer.join()
        read += [m.offset() for m in reader.consume(1000, 1.0) if m.error() is None]
        reader.close()
        assert read == list(range(read[-1] + 1))  # every record once, in order, none skipped


def test_yaml_entries_are_marked_and_cannot_be_removed_with_the_cli(
    kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], cli: Run
) -> None:
    group = unique("billing")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "groups": ["orders-.*"]}])
    flow_args = ("--source", env.west.alias, "--target", env.east.alias)
    code, out, _ = cli(env.path, "groups", *flow_args, "--add", group)
    assert code == 0
    assert out.splitlines()[:3] == ["Current whitelist:", f"orders-.* (from {env.path})", group]
    code, _, err = cli(env.path, "groups", *flow_args, "--remove", "orders-.*")
    assert code == 1
    assert (
        err == f"error: 'orders-.*' is in the whitelist of {env.path}, not srm-control's: edit the YAML to remove it\n"
    )
    code, out, _ = cli(env.path, "groups", *flow_args, "--remove", group)
    assert code == 0 and group not in out


def reset_with_kafka_tool(env: Env, group: str, csv_text: str) -> None:
    """``kafka-consumer-groups --reset-offsets --group G --from-file F --execute`` on the target."""
    csv = env.tmp / f"{group}.csv"
    csv.write_text(csv_text)
    tool = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
    bootstrap = env.east.bootstrap_servers or ""
    args = ["--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--from-file", str(csv), "--execute"]
    result = subprocess.run(kafka_command(tool, *args), check=False, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def refused_while_active(env: Env, cli: Run, group: str) -> None:
    """failover --apply for a group with a member on the target: refused, nothing written."""
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, "orders")
    with active_member(env.east, group, remote, committed=1):
        code, _, err = cli(
            env.path, "failover", "--source", flow.source, "--target", flow.target, "--group", group, "--apply"
        )
        assert code == 1
        assert err.startswith(f"error: nothing written for 1 group(s): {group}: refused: active on {flow.target}")
        assert committed_on(env.east, group) == {(remote, 0): 1}


@pytest.fixture
def own_source(kafka: SrmConfig, tmp_path: Path) -> Iterator[tuple[Env, LocalClusters]]:
    """A flow from a source cluster of this test's own (it gets stopped) to the session's east."""
    token = uuid.uuid4().hex[:6]
    names = {"west": f"s{token}", "east": f"e{token}"}
    broker, controller = free_ports(2)
    data = {
        "defaults": SINGLE_BROKER,
        "clusters": {
            names["west"]: {"bootstrap.servers": f"127.0.0.1:{broker}", "local": {"controller.port": controller}},
            names["east"]: {"bootstrap.servers": kafka.clusters[1].bootstrap_servers},
        },
        "flows": [{"source": names["west"], "target": names["east"], "topics": ["orders"]}],
        "storage": {"warehouse": str(tmp_path / "warehouse"), "plan_logs": str(tmp_path / "plan-logs")},
    }
    path = tmp_path / "srm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    config = load_config(path)
    clusters = LocalClusters(config.local_clusters(), tmp_path / "kafka")
    clusters.up()
    try:
        yield Env(path, config, tmp_path, names), clusters
    finally:
        clusters.down()


def test_offsets_export_feeds_kafka_consumer_groups_and_failover_applies_with_the_source_down(
    spark: Any, own_source: tuple[Env, LocalClusters], unique: Callable[[str], str], cli: Run
) -> None:

    env, source_cluster = own_source
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, "orders")
    flow_args = ("--source", flow.source, "--target", flow.target)
    ensure_topic(clients.admin_client(env.west), "orders", 4)
    produce(env.west, "orders", sequenced(4, 400))
    replicate(spark, env)
    billing, audit = unique("billing"), unique("audit")
    positions = {billing: {0: 10, 1: 55, 2: 0, 3: 99}, audit: {0: 100, 1: 1, 2: 37, 3: 50}}
    for group, at in positions.items():
        commit(env.west, group, {("orders", p): o for p, o in at.items()})
    CheckpointPass(env.config, flow).run()
    source = contents(env.west, "orders")

    def resumes_exactly(group: str, offsets: dict[int, int]) -> None:
        for partition, upstream in positions[group].items():
            unread = [r[:4] for r in source[partition] if r[4] >= upstream]
            assert read_from(env.east, remote, partition, offsets[partition]) == unread, (group, partition)

    source_cluster.down()  # everything below works with the source cluster stopped

    code, out, err = cli(env.path, "offsets", *flow_args, "--group", billing, "--export")
    assert code == 0, err
    out_single = out
    rows = [line.split(",") for line in out.splitlines()]
    assert [(t, int(p)) for t, p, _ in rows] == [(remote, p) for p in range(4)]
    exported = {int(p): int(o) for _, p, o in rows}
    resumes_exactly(billing, exported)
    code, out, _ = cli(env.path, "offsets", *flow_args, "--group", f"{billing},{audit}", "--export")
    assert code == 0 and {line.split(",")[0] for line in out.splitlines()} == {billing, audit}
    assert len(out.splitlines()) == 8

    reset_with_kafka_tool(env, billing, out_single)  # Kafka's own tool applies the single-group CSV
    assert committed_on(env.east, billing) == {(remote, p): o for p, o in exported.items()}

    # failover --apply: an active group is refused and left alone; once idle it gets the exact offsets
    refused_while_active(env, cli, audit)
    code, out, err = cli(env.path, "failover", *flow_args, "--group", audit)  # dry run
    assert code == 0 and "dry run" in out and committed_on(env.east, audit) == {(remote, 0): 1}
    code, out, err = cli(env.path, "failover", *flow_args, "--group", audit, "--apply")
    assert code == 0, err
    assert out.count("applied") == 4
    after = committed_on(env.east, audit)
    resumes_exactly(audit, {p: after[(remote, p)] for p in range(4)})

    # what needs the stopped source says so in one line, naming its bootstrap servers
    code, _, err = cli(env.path, "failover", *flow_args, "--group", audit, "--planned")
    assert code == 1 and len(err.splitlines()) == 1
    assert f"cluster {flow.source} ({env.west.bootstrap_servers}) did not answer" in err


def test_errors_are_one_clear_line(kafka: SrmConfig, tmp_path: Path, cli: Run) -> None:
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east"}])
    w, e = env.west.alias, env.east.alias
    cases = [
        (("topics", "--source", "nope", "--target", e, "--list"), f"error: unknown cluster alias 'nope' in {env.path}"),
        (("groups", "--source", e, "--target", w, "--list"), f"error: no flow {e}->{w} in {env.path}"),
        (("topics", "--source", w, "--target", e, "--add", "orders,tmp["), "error: invalid regex 'tmp['"),
        (("groups", "--source", w, "--target", e, "--add-blacklist", "(x"), "error: invalid regex '(x'"),
        (("offsets", "--source", w, "--target", e, "--group", "ghost", "--export"), "error: no checkpoints for group"),
        (("translate", "--source", w, "--target", e, "--group", "ghost"), "error: no checkpoints for group 'ghost'"),
        (("failover", "--source", w, "--target", e, "--group", "ghost["), "error: groups 'ghost[' is neither"),
    ]
    for args, expected in cases:
        code, _, err = cli(env.path, *args)
        assert code == 1, args
        assert err.startswith(expected), (args, err)
        assert len(err.splitlines()) == 1 and "Traceback" not in err, err

    # a cluster nobody answers at: named with its bootstrap servers
    (port,) = free_ports(1)
    dead = tmp_path / "dead.yaml"
    data = yaml.safe_load(env.path.read_text())
    data["clusters"][e]["bootstrap.servers"] = f"127.0.0.1:{port}"
    dead.write_text(yaml.safe_dump(data))
    code, _, err = cli(dead, "topics", "--source", w, "--target", e, "--list")
    assert code == 1 and len(err.splitlines()) == 1
    assert err.startswith(f"error: cluster {e} (127.0.0.1:{port}) did not answer within 10 s")


def checkpointed(env: Env, group: str) -> dict[int, int]:
    """Upstream offset per partition of the group's checkpoints in force on the target."""
    topic = env.flow().policy.checkpoints_topic(env.west.alias)
    return {c.partition: c.upstream_offset for c in read_checkpoints(env.east, topic).values() if c.group == group}


def test_status_translate_group_lists_and_failback(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], cli: Run
) -> None:
    topic, group, back = unique("ctl-status"), unique("reader"), unique("returning")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    flow_args = ("--source", flow.source, "--target", flow.target)
    ensure_topic(clients.admin_client(env.west), topic, 2)
    produce(env.west, topic, sequenced(2, 100))
    replicate(spark, env)
    commit(env.west, group, {(topic, 0): 7, (topic, 1): 30})
    CheckpointPass(env.config, flow).run()
    produce(env.west, topic, sequenced(2, 25, start=100))

    code, out, err = cli(env.path, "status", *flow_args)
    assert code == 0, err
    # The session's source may hold heartbeats of other tests' flows, which this flow copies too.
    beat = re.search(r"last replicated heartbeat: (never|(\d+) s ago)", out)
    assert beat, out
    if beat[1] == "never":
        assert f"{flow.name}: stalled (no heartbeat has been replicated yet)" in out
    else:
        assert re.search(rf"{re.escape(flow.name)}: (running|stalled since \S+) \(.*replicated heartbeat", out), out
    assert f"  lag {topic}: 25\n" in out
    assert "  last checkpoint: never" not in out and "  last error: none" in out

    source = contents(env.west, topic)
    code, out, err = cli(env.path, "translate", *flow_args, "--group", group)
    assert code == 0, err
    lines = out.splitlines()
    assert [line.split(" -> ")[0] for line in lines] == [f"{group}: {topic}[0]@7", f"{group}: {topic}[1]@30"]
    for partition, line in enumerate(lines):
        downstream = int(line.rsplit("@", 1)[1])
        upstream = (7, 30)[partition]
        assert read_from(env.east, remote, partition, downstream)[0] == source[partition][upstream][:4]

    code, out, err = cli(env.path, "translate", *flow_args, "--topic", topic, "--partition", "1", "--offset", "12")
    assert code == 0, err
    downstream = int(out.strip().rsplit("@", 1)[1])
    assert read_from(env.east, remote, 1, downstream)[0] == source[1][12][:4]

    # a group on srm-control's blacklist gets no new checkpoints; taken off it, it does again
    assert cli(env.path, "groups", *flow_args, "--add-blacklist", group)[0] == 0
    commit(env.west, group, {(topic, 0): 50, (topic, 1): 60})
    CheckpointPass(env.config, flow).run()
    assert checkpointed(env, group) == {0: 7, 1: 30}
    assert cli(env.path, "groups", *flow_args, "--remove-blacklist", group)[0] == 0
    CheckpointPass(env.config, flow).run()
    assert checkpointed(env, group) == {0: 50, 1: 60}

    # failback: a group that consumed the remote topic on east returns to the topic on west, exactly
    on_east = {0: 20, 1: 3}
    targets = {p: contents(env.east, remote)[p] for p in on_east}
    commit(env.east, back, {(remote, p): targets[p][o][4] for p, o in on_east.items()})
    code, out, err = cli(env.path, "failback", *flow_args, "--group", back, "--apply")
    assert code == 0, err
    assert out.count("applied") == 2
    after = committed_on(env.west, back)
    for partition, index in on_east.items():
        assert source[partition][after[(topic, partition)]][:4] == targets[partition][index][:4]
