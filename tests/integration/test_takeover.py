"""Taking over from Apache Kafka's own MirrorMaker 2 (the resolved jars, dedicated mode): MM2 copies,
stops; ``srm-control takeover`` starts our flow exactly where the target stands; every record is on the
target once, in order; a group MM2 checkpointed fails over exactly with our checkpoints."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from bench.mm2 import mm2_properties as base_properties
from srm.config import SrmConfig
from srm.devenv.jvm import kafka_command
from srm.kafka import clients
from srm.kafka.topics import ensure_topic
from srm.offsets.checkpoint_store import read_checkpoints
from srm.offsets.checkpointing import CheckpointPass
from tests.checkpointing import commit, read_from
from tests.conftest import Run
from tests.helpers import produce
from tests.replication import Env, contents, make_env, replicate, sequence_report, sequenced

pytestmark = pytest.mark.integration
MM2_WITHIN_S = 180.0


def mm2_properties(env: Env, topic: str, group: str) -> str:
    """The benchmark's MM2 (defaults, replication factors of 1), quick to checkpoint and commit."""
    servers = {env.west.alias: env.west.bootstrap_servers or "", env.east.alias: env.east.bootstrap_servers or ""}
    quick = [
        f"{env.west.alias}->{env.east.alias}.groups = {group}",
        "emit.checkpoints.interval.seconds = 1",
        "refresh.groups.interval.seconds = 1",
        "refresh.topics.interval.seconds = 1",
        "offset.flush.interval.ms = 1000",
    ]
    return base_properties(servers, topic, 1) + "\n".join(quick) + "\n"


@contextmanager
def mirror_maker(properties: Path, log: Path) -> Iterator[subprocess.Popen[bytes]]:
    command = kafka_command("org.apache.kafka.connect.mirror.MirrorMaker", str(properties), heap="512m")
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(10)


def wait_for(what: str, done: Callable[[], bool], process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + MM2_WITHIN_S
    while not done():
        assert process.poll() is None, f"MirrorMaker 2 exited:\n{log.read_text()[-3000:]}"
        assert time.monotonic() < deadline, (
            f"MirrorMaker 2: no {what} in {MM2_WITHIN_S:.0f} s:\n{log.read_text()[-3000:]}"
        )
        time.sleep(1)


def test_a_flow_takes_over_from_mirrormaker2_without_copying_twice_or_skipping(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Callable[[str], str], cli: Run
) -> None:
    from srm.operations import takeover

    topic, group = unique("mm2-orders"), unique("mm2-billing")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    flow = env.flow()
    remote = flow.policy.format_remote_topic(flow.source, topic)
    flow_args = ("--source", flow.source, "--target", flow.target)
    ensure_topic(clients.admin_client(env.west), topic, 3)
    produce(env.west, topic, sequenced(3, 300))
    positions = {0: 20, 1: 45, 2: 99}
    commit(env.west, group, {(topic, p): o for p, o in positions.items()})
    properties = tmp_path / "mm2.properties"
    properties.write_text(mm2_properties(env, topic, group))
    checkpoints_topic = flow.policy.checkpoints_topic(flow.source)

    def mm2_checkpoints() -> dict[int, Any]:
        found = read_checkpoints(env.east, checkpoints_topic).values()
        return {c.partition: c for c in found if c.group == group}

    def copied() -> int:
        names = clients.admin_client(env.east).list_topics(timeout=10).topics
        return sum(map(len, contents(env.east, remote).values())) if remote in names else 0

    log = tmp_path / "mm2.log"
    with mirror_maker(properties, log) as process:
        wait_for("copy of 300 records", lambda: copied() == 300, process, log)
        wait_for("checkpoints of the group", lambda: len(mm2_checkpoints()) == 3, process, log)
        committed = lambda: takeover.mm2_positions(env.config, flow, takeover.offsets_topic(properties, flow))  # noqa: E731
        wait_for("committed Connect offsets", lambda: len([k for k in committed() if k[0] == topic]) == 3, process, log)
    assert process.returncode is not None
    by_mm2 = mm2_checkpoints()

    code, out, err = cli(env.path, "takeover", *flow_args, "--from-mm2", str(properties))
    assert code == 0 and "dry run: nothing written" in out, out + err
    code, out, err = cli(env.path, "takeover", *flow_args, "--from-mm2", str(properties), "--apply", "--json")
    assert code == 0, out + err
    report = {(p["topic"], p["partition"]): p for p in json.loads(out)["partitions"]}
    for partition in range(3):
        entry = report[(topic, partition)]
        assert entry["next_offset"] == 100 and entry["records_on_target"] == 100, entry
        assert entry["duplicated_by_mm2"] == 0 and entry["mm2_committed_next_offset"] <= 100, entry
    code, _, err = cli(env.path, "takeover", *flow_args, "--from-mm2", str(properties), "--apply")
    assert code == 1 and "has already copied" in err and "nothing was written" in err, err

    produce(env.west, topic, sequenced(3, 150, start=300))
    replicate(spark, env)
    expected = {p: [s for s in range(450) if s % 3 == p] for p in range(3)}
    assert sequence_report(contents(env.east, remote), expected) == {"missing": 0, "duplicated": 0, "out_of_order": 0}

    # MM2's checkpoints of the group are still there; ours translate it exactly from the same topic.
    assert {p: c.upstream_offset for p, c in by_mm2.items()} == positions
    CheckpointPass(env.config, flow).run()
    ours = mm2_checkpoints()
    source = contents(env.west, topic)
    for partition, upstream in positions.items():
        assert ours[partition].upstream_offset == upstream
        unread = [r[:4] for r in source[partition] if r[4] >= upstream]
        assert read_from(env.east, remote, partition, ours[partition].downstream_offset) == unread, partition
        assert by_mm2[partition].downstream_offset <= ours[partition].downstream_offset  # MM2's may re-read
