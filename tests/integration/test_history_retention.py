"""The sync history follows the source's retention: after records are deleted on the source, the
prune keeps only what translation can still need, translation stays exact, and the history topic
keeps only what the warehouse has not ingested (and what a journaled progress record names)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from srm.config import SrmConfig
from srm.kafka import clients
from srm.kafka.internal_topics import history_topic_name, progress_topic_name
from srm.kafka.partitions import delete_records_before, list_offsets
from srm.kafka.topics import ensure_topic
from srm.mm2.records import ProgressRecord
from srm.offsets import retention
from srm.offsets.api import Translator
from srm.offsets.checkpointing import CheckpointPass
from srm.offsets.history import load_history
from srm.offsets.retention import HistoryPruner
from srm.storage.warehouse import SYNC_HISTORY
from tests.helpers import produce
from tests.replication import make_env, replicate, sequenced

pytestmark = pytest.mark.integration
FAR_FUTURE_MS = 2**62  # past every margin of the history topic


def test_prune_follows_the_source_log_start_and_keeps_translation_exact(
    spark: Any, kafka: SrmConfig, tmp_path: Path, unique: Any
) -> None:
    topic, gone = unique("orders"), unique("gone")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic, gone]}])
    west = clients.admin_client(env.west)
    ensure_topic(west, topic, 2)
    ensure_topic(west, gone, 1)
    flow = env.flow()
    for round_ in range(4):  # four runs: four transactions per partition at least, a run each
        produce(env.west, topic, sequenced(2, 400, start=400 * round_))
        produce(env.west, gone, sequenced(1, 10, start=10 * round_))
        replicate(spark, env, flow)
    before = load_history(env.config, flow)
    assert len(before.get(topic, 0).runs) >= 4
    remote = flow.policy.format_remote_topic(flow.source, topic)
    probes = [(p, o) for p in (0, 1) for o in range(250, 800, 37)]
    expected = {(p, o): Translator(env.config, flow).offset(topic, p, o).offset for p, o in probes}
    backward = {(p, o): Translator(env.config, flow).offset(remote, p, o, "backward").offset for p, o in probes}

    delete_records_before(west, topic, 0, 250)  # retention on the source, as it looks to a reader
    delete_records_before(west, topic, 1, 250)
    west.delete_topics([gone])[gone].result(30)
    pruned = HistoryPruner(env.config, flow).prune(now_ms=FAR_FUTURE_MS)

    rows = env.warehouse.read(SYNC_HISTORY, flow=flow.name)
    assert not [r for r in rows if r["topic"] == gone], "a topic deleted on the source keeps no history"
    for partition in (0, 1):
        mine = [r for r in rows if r["topic"] == topic and r["partition"] == partition]
        latest = max(r["history_offset"] for r in mine)
        below = [r for r in mine if r["source_first"] + r["length"] <= 250 and r["history_offset"] != latest]
        assert not below, f"partition {partition} keeps runs below the source's log start: {below}"
        assert len(mine) < len([r for r in before.get(topic, partition).runs]) + 2
    assert pruned.rows_after < pruned.rows_before
    after = Translator(env.config, flow)
    assert {(p, o): after.offset(topic, p, o).offset for p, o in probes} == expected
    assert {(p, o): after.offset(remote, p, o, "backward").offset for p, o in probes if o >= 250} == {
        k: v for k, v in backward.items() if k[1] >= 250
    }
    # the history topic keeps what is not ingested: everything was, at the end of the last run
    history = history_topic_name(flow)
    east = clients.admin_client(env.east)
    ingested = env.warehouse.version(SYNC_HISTORY, f"history:{flow.name}")
    assert pruned.topic_start == ingested
    assert list_offsets(east, [(history, 0)], "earliest")[(history, 0)] == ingested


def test_a_journaled_progress_record_keeps_the_history_it_names(kafka: SrmConfig, tmp_path: Path, unique: Any) -> None:
    topic = unique("orders")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    flow = env.flow()
    ensure_topic(clients.admin_client(env.west), topic, 1)
    east = clients.admin_client(env.east)
    history, progress = history_topic_name(flow), progress_topic_name(flow)
    ensure_topic(east, history, 1)
    ensure_topic(east, progress, 1, config={"cleanup.policy": "compact"})
    produce(env.east, history, [{"key": b"k", "value": b"v"} for _ in range(20)])
    journaled = ProgressRecord(topic, 0, "id-1", 7, history_from=5)
    produce(env.east, progress, [journaled.as_produce_kwargs()])
    env.warehouse.append(SYNC_HISTORY, [], f"history:{flow.name}", 20)  # as if all 20 were ingested
    pruned = HistoryPruner(env.config, flow).prune(now_ms=FAR_FUTURE_MS)
    assert pruned.topic_start == 5
    produce(env.east, progress, [ProgressRecord(topic, 0, "id-1", 9).as_produce_kwargs()])  # plain again
    assert HistoryPruner(env.config, flow).prune(now_ms=FAR_FUTURE_MS).topic_start == 20


def test_a_checkpoint_pass_trims_the_history_topic_to_what_is_ingested_past_the_margin(
    kafka: SrmConfig, tmp_path: Path, unique: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = unique("orders")
    env = make_env(kafka, tmp_path, [{"source": "west", "target": "east", "topics": [topic]}])
    flow = env.flow()
    ensure_topic(clients.admin_client(env.west), topic, 1)
    east = clients.admin_client(env.east)
    history = history_topic_name(flow)
    ensure_topic(east, history, 1)
    produce(env.east, history, [{"key": b"k", "value": b"v"} for _ in range(20)])
    env.warehouse.append(SYNC_HISTORY, [], f"history:{flow.name}", 12)  # as if 12 of 20 were ingested

    CheckpointPass(env.config, flow).run()  # the records are a moment old: inside the margin, kept
    assert list_offsets(east, [(history, 0)], "earliest")[(history, 0)] == 0
    monkeypatch.setattr(retention, "TOPIC_MARGIN_S", 0.0)
    CheckpointPass(env.config, flow).run()
    assert list_offsets(east, [(history, 0)], "earliest")[(history, 0)] == 12  # what is not ingested stays
