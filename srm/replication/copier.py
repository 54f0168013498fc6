"""Copy one slot's source partitions to the target exactly once (runs in a Spark task).

1. The slot's transactional producer starts (fencing any zombie of the same slot and aborting
   its open transaction), then the committed progress of every partition is read from the target:
   the target, not the plan, decides where copying resumes.
2. Records the source no longer has (retention, a recreated topic) are accounted as losses; the
   flow's on_data_loss decides: ``fail`` leaves that partition untouched so the driver can stop
   the flow with the exact range, ``continue`` records it and goes on.
3. The partitions are consumed together (read_committed) and produced p -> p with their key,
   value, headers and timestamp; a partition is finished when a record at or past its planned
   end arrives or the consumer reports its end, so trailing commit markers and aborted records
   are covered by the progress too.
4. Chunks are committed as described in :mod:`srm.replication.writer`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from srm import clients
from srm.errors import ReplicationError, SrmError
from srm.replication.clientcache import CACHE, ClientCache
from srm.replication.job import CopyJob, Loss, PartitionResult
from srm.replication.kafka_errors import is_fatal, read_error
from srm.replication.partition_state import PartitionState
from srm.replication.progress import Progress, read_progress
from srm.replication.writer import TargetWriter
from srm.topics import list_offsets, partition_leaders

log = logging.getLogger(__name__)

CONSUME_BATCH = 10_000
# consume() returns when CONSUME_BATCH records are there or this time has passed, not earlier:
# short, so a small batch or a partition's end is not held back.
POLL_TIMEOUT_S = 0.05
# With data behind it, a fetch returns within milliseconds; this long without any record or
# end-of-partition event means the source cluster is gone or the partition has no leader.
STALL_TIMEOUT_S = 90.0
CONSUMER_SETTINGS = {
    "enable.partition.eof": True,
    "auto.offset.reset": "error",  # never jump silently: a missing offset is reported as a loss
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "queued.max.messages.kbytes": 256 * 1024,
    "fetch.wait.max.ms": 100,
    # A partition assigned again by the next task sometimes starts fetching only 1.000 s later
    # (debug=fetch: "start fetching" at t, first Fetch at t + 1 s). These three backoffs/sleeps
    # default to 1000/1000/500 ms; lowering them made the stall rarer in measurements here
    # (from 3 in 10 micro-batches to about 1 in 20) but did not remove it.
    "socket.blocking.max.ms": 50,
    "fetch.queue.backoff.ms": 10,
    "fetch.error.backoff.ms": 10,
}
WAKE_TIMEOUT_S = 5.0
RETENTION = "were removed from the source (retention or deleted records) before they were copied"


class SlotCopier:
    def __init__(self, job: CopyJob, cache: ClientCache = CACHE) -> None:
        self.job = job
        self.cache = cache
        self.fail_on_loss = job.flow.settings.on_data_loss == "fail"

    def run(self) -> list[PartitionResult]:
        writer = TargetWriter(self.job, self.cache)
        try:
            states = self._states(writer)
            writer.track(states)
            active = [s for s in states if s.active]
            if active:
                self._copy(writer, states, active)
            writer.commit(states)
        except BaseException:
            writer.abort()
            raise
        finally:
            writer.release()
        finished = int(time.time() * 1000)
        for state in states:
            state.result.next_offset = state.committed if state.committed is not None else state.range.start
            state.result.finished_ms = finished
        return [s.result for s in states]

    # --- where each partition resumes ---------------------------------------------------------
    def _states(self, writer: TargetWriter) -> list[PartitionState]:
        ranges = self.job.ranges
        progress = read_progress(writer.target_consumer, [(r.target_topic, r.partition) for r in ranges])
        lows = list_offsets(self._source_admin(), [r.key for r in ranges], "earliest")
        started = int(time.time() * 1000)
        states = []
        for r in ranges:
            prog = progress.get((r.target_topic, r.partition))
            result = PartitionResult(r.topic, r.partition, r.target_topic, r.end, started_ms=started)
            state = PartitionState(r, result, r.start, prog.next_offset if prog else None, r.topic_id)
            self._resume(state, prog, lows[r.key])
            states.append(state)
        return states

    def _resume(self, state: PartitionState, prog: Progress | None, low: int) -> None:
        r = state.range
        losses = []
        if prog is not None and prog.topic_id and r.topic_id and prog.topic_id != r.topic_id:
            # Deleted and created again: offsets restart, and whatever the old topic held past our
            # progress is gone. What was planned is known; records written after the last plan
            # cannot be, so a recreation is always reported, even when no lost offset is known.
            old_end = max(prog.next_offset, r.start)
            reason = (
                f"of the old topic were lost when it was deleted and recreated (topic id {prog.topic_id} -> "
                f"{r.topic_id}; records written after the last plan are not known)"
            )
            losses.append(Loss(r.topic, r.partition, prog.next_offset, old_end, reason))
            state.next_offset = low
        elif prog is not None:
            state.next_offset = prog.next_offset
        if state.next_offset < low:
            losses.append(Loss(r.topic, r.partition, state.next_offset, low, RETENTION))
            state.next_offset = low
        self._account(state, losses)

    def _account(self, state: PartitionState, losses: list[Loss]) -> None:
        state.result.losses.extend(losses)
        for loss in losses:
            log.error("data loss in flow %s: %s", self.job.flow.name, loss)
        if losses and self.fail_on_loss:
            state.blocked = True

    # --- the copy loop ------------------------------------------------------------------------
    def _copy(self, writer: TargetWriter, states: list[PartitionState], active: list[PartitionState]) -> None:
        from confluent_kafka import TopicPartition

        consumer = self._source_consumer()
        by_source = {s.range.key: s for s in states}
        assignment = [TopicPartition(s.range.topic, s.range.partition, s.next_offset) for s in active]
        consumer.assign(assignment)
        consumer.resume(assignment)  # a cached consumer may have paused these in an earlier task
        self._wake_fetchers(consumer, assignment)
        remaining = {s.range.key for s in active}
        last_activity = time.monotonic()
        try:
            while remaining:
                messages = consumer.consume(CONSUME_BATCH, POLL_TIMEOUT_S)
                if messages:
                    last_activity = time.monotonic()
                    self._handle(writer, consumer, by_source, remaining, messages)
                elif time.monotonic() - last_activity > STALL_TIMEOUT_S:
                    raise self._stalled(by_source, remaining)
                writer.producer.poll(0)
                if writer.chunk_full():
                    writer.commit(states)
        finally:
            consumer.unassign()

    def _wake_fetchers(self, consumer: Any, assignment: list[Any]) -> None:
        """librdkafka starts fetching a newly assigned partition when the leader's broker thread
        next wakes up, which on an idle connection is up to 1 s later: measured here, 1 in 2
        continuous-mode batches waited 1.0 s for it. Any request to the leader wakes that thread
        now: one cheap ListOffsets per distinct leader, found with one describe request for the
        assigned topics (bench/REPORT.md, "Latency")."""
        from confluent_kafka import KafkaException

        try:
            leaders = partition_leaders(self._source_admin(), sorted({tp.topic for tp in assignment}))
            by_leader: dict[int, Any] = {}
            for tp in assignment:
                if (tp.topic, tp.partition) in leaders:
                    by_leader.setdefault(leaders[(tp.topic, tp.partition)], tp)
            for tp in by_leader.values():
                consumer.get_watermark_offsets(tp, timeout=WAKE_TIMEOUT_S, cached=False)
        except (KafkaException, SrmError) as exc:  # only a shortcut: fetching starts on its own anyway
            log.debug("waking the fetchers of %s failed: %s", self.job.source.alias, exc)

    def _handle(
        self,
        writer: TargetWriter,
        consumer: Any,
        by_source: dict[tuple[str, int], PartitionState],
        remaining: set[tuple[str, int]],
        messages: list[Any],
    ) -> None:
        """The per-record path (profiled in bench/REPORT.md): only what each record needs here;
        counts, sizes and ages are added up per partition after the loop."""
        polled_ms = time.time() * 1000
        produce = writer.produce
        # state -> where this call's records start in state.produced and state.stamps
        touched: dict[PartitionState, tuple[int, int]] = {}
        for message in messages:
            state = by_source.get((message.topic(), message.partition()))
            if state is None or state.done:
                continue
            error = message.error()
            if error is not None:
                self._event(consumer, state, remaining, message, error)
                continue
            offset = message.offset()
            end = state.range.end
            if offset >= end:
                self._finish(consumer, state, remaining, end)
                continue
            if state not in touched:
                touched[state] = (len(state.produced), len(state.stamps))
                if state.result.first_offset < 0:
                    state.result.first_offset = offset
            state.result.bytes += produce(state, message, offset, message.timestamp()[1])
            state.next_offset = offset + 1
            if offset + 1 >= end:
                self._finish(consumer, state, remaining, end)
        for state, (first, first_stamp) in touched.items():
            result = state.result
            result.last_offset = state.next_offset - 1
            result.records += len(state.produced) - first
            result.record_age.add_ages(polled_ms, state.stamps[first_stamp:])

    def _event(
        self, consumer: Any, state: PartitionState, remaining: set[tuple[str, int]], message: Any, error: Any
    ) -> None:
        name = error.name()
        if name == "_PARTITION_EOF":
            # Everything below the partition's end has been delivered (read_committed: the LSO).
            if message.offset() >= state.range.end:
                self._finish(consumer, state, remaining, state.range.end)
            else:  # the log ends below the plan (truncated or recreated): the next batch re-plans
                log.warning(
                    "%s[%d] ends at %d, below the planned %d",
                    state.range.topic,
                    state.range.partition,
                    message.offset(),
                    state.range.end,
                )
                self._finish(consumer, state, remaining, None)
            return
        if name in ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"):
            self._out_of_range(consumer, state, remaining)
            return
        if (
            is_fatal(error)
            or name.endswith("AUTHORIZATION_FAILED")
            or name in ("UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC")
        ):
            raise read_error(
                error,
                source=self.job.source.alias,
                topic=state.range.topic,
                partition=state.range.partition,
                offset=state.next_offset,
            )
        log.warning("reading %s[%d]: %s (retrying)", state.range.topic, state.range.partition, error.str())

    def _out_of_range(self, consumer: Any, state: PartitionState, remaining: set[tuple[str, int]]) -> None:
        """Retention deleted records while we were reading them."""
        from confluent_kafka import TopicPartition

        low = list_offsets(self._source_admin(), [state.range.key], "earliest")[state.range.key]
        if low <= state.next_offset:
            raise ReplicationError(
                f"offset {state.next_offset} of topic {state.range.topic!r} partition {state.range.partition} "
                f"is out of range on {self.job.source.alias} although the log starts at {low}"
            )
        self._account(state, [Loss(state.range.topic, state.range.partition, state.next_offset, low, RETENTION)])
        if state.blocked:
            self._finish(consumer, state, remaining, None)
            return
        state.next_offset = low
        if low >= state.range.end:
            self._finish(consumer, state, remaining, state.range.end)
        else:
            consumer.seek(TopicPartition(state.range.topic, state.range.partition, low))

    def _finish(self, consumer: Any, state: PartitionState, remaining: set[tuple[str, int]], end: int | None) -> None:
        from confluent_kafka import TopicPartition

        if end is not None and not state.blocked:
            state.next_offset = max(state.next_offset, end)
        state.done = True
        remaining.discard(state.range.key)
        consumer.pause([TopicPartition(state.range.topic, state.range.partition)])

    def _stalled(
        self, by_source: dict[tuple[str, int], PartitionState], remaining: set[tuple[str, int]]
    ) -> ReplicationError:
        waiting = ", ".join(f"{t}[{p}] at offset {by_source[(t, p)].next_offset}" for t, p in sorted(remaining))
        return ReplicationError(
            f"no record from {self.job.source.alias} ({self.job.source.describe()}) for {STALL_TIMEOUT_S:.0f} s while "
            f"copying {waiting}: is the source cluster reachable and does every partition have a leader?"
        )

    # --- clients ------------------------------------------------------------------------------
    def _source_consumer(self) -> Any:
        def build() -> Any:
            return clients.consumer(self.job.source, f"__srm.copy.{self.job.flow.target}", **CONSUMER_SETTINGS)

        return self.cache.client(("source-consumer", self.job.flow.name), build)

    def _source_admin(self) -> Any:
        return self.cache.client(("source-admin", self.job.flow.name), lambda: clients.admin_client(self.job.source))


def run_slot(job: CopyJob) -> list[dict[str, Any]]:
    """Entry point of a Spark task: copy the slot's ranges, return one payload per partition."""
    return [result.payload() for result in SlotCopier(job).run()]
