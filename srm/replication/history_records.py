"""The sync history a transaction carries: per partition it moved, one record of its exact offset
runs and next offset in ``srm-offset-syncs.<source>.internal`` (and MM2 OffsetSyncs when that topic
lives on the target), written into the same transaction as the records they describe."""

from __future__ import annotations

from typing import Any

from srm.mm2.records import OPENER_HEADERS, OffsetRunsRecord, OffsetSync
from srm.replication.job import CopyJob
from srm.replication.partition_state import PartitionState
from srm.replication.runs import OffsetRun, SyncPacer


class HistoryRecords:
    """Writes a transaction's history records with the producer it is given. ``job`` is read at
    each call (a renewed lease replaces it)."""

    def __init__(self, job: CopyJob, exactly_once: bool) -> None:
        self.job = job
        self.exactly_once = exactly_once
        # MM2 offset syncs on the target go into the transactions: an aborted one takes its syncs
        # with it, so the pacers start afresh (reset: the next record of each partition gets a sync).
        self.pacers: dict[tuple[str, int], SyncPacer] = {}

    def open(self, producer: Any, state: PartitionState) -> None:
        """Put the history's partition into the transaction with its first records.

        The history records wait for the records' acknowledgements (they hold the target offsets).
        A partition new to a transaction is first added to it at the coordinator (AddPartitionsToTxn,
        a round trip with a write to the transaction log), so a history partition joining only then
        adds a round trip to every commit, after the flush (``python -m bench.experiments.commit_steps``: the
        step after the flush p50 3.6 -> 1.1 ms, p99 16.1 -> 7.7 ms with this record). Written with
        the transaction's first record instead, it joins together with the data partitions. The
        record restates the partition's committed progress and no runs, and carries a header the
        ingest skips (a reader without it sees a position the flow had committed already, which
        changes nothing).
        """
        if not self.exactly_once:
            return
        committed = state.committed if state.committed is not None else state.origin
        record = OffsetRunsRecord(state.range.topic, state.range.partition, state.topic_id, committed, ())
        producer.produce(self.job.history_topic, headers=OPENER_HEADERS, **record.as_produce_kwargs())

    def write(self, producer: Any, state: PartitionState) -> list[OffsetRun]:
        """Produce the history record of ``state``; the runs it holds (accounted for only once the
        transaction commits)."""
        if state.acked:
            state.tracker.extend(state.produced, state.acked)
            state.forget_acknowledged()
        runs = state.tracker.finish()
        # Interleaved skips (provenance) or gaps can make many runs: split into records far below 1 MB.
        for record in OffsetRunsRecord.batches(
            state.range.topic,
            state.range.partition,
            state.topic_id,
            state.next_offset,
            tuple((r.source_first, r.target_first, r.length) for r in runs),
        ):
            producer.produce(self.job.history_topic, **record.as_produce_kwargs())
        if self.job.mm2_syncs_on_target:
            pacer = self.pacers.setdefault(state.target, SyncPacer(self.job.flow.settings.offset_lag_max))
            for upstream, downstream in pacer.syncs(runs):
                sync = OffsetSync(state.range.topic, state.range.partition, upstream, downstream)
                producer.produce(self.job.mm2_syncs_on_target, **sync.as_produce_kwargs())
        return runs

    def reset(self) -> None:
        """The transaction was aborted: its MM2 syncs with it."""
        self.pacers.clear()
