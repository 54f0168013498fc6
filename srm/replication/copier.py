"""Copying one slot's source partitions to the target exactly once (runs in a Spark Python worker).

1. The slot's transactional producer starts (fencing any earlier instance of the same slot and
   aborting its open transaction), then the copier checks that its epoch still owns the flow
   (:mod:`srm.replication.ownership`), then reads the committed progress of every partition from
   the target: the target, not the plan, decides where copying resumes.
2. Records the source no longer has (retention, a recreated topic) are accounted as losses; the
   flow's on_data_loss decides: ``fail`` leaves that partition untouched so the driver can stop
   the flow with the exact range, ``continue`` records it and goes on.
3. The partitions are consumed together (read_committed) and produced p -> p with their key,
   value, headers and timestamp. In available-now mode a partition is finished when a record at
   or past its planned end arrives or the consumer reports its end, so trailing commit markers
   and aborted records are covered by the progress too; in continuous mode ranges are open-ended.
4. Transactions are committed as described in :mod:`srm.replication.writer`; after an aborted one
   every partition goes back to its committed progress and is read again from there.

:class:`CopyLoop` is the engine; :mod:`srm.replication.drain` drives it for one available-now task, and
:mod:`srm.replication.resident` keeps one running across the leases of continuous mode.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from functools import partial
from typing import Any

from srm.errors import ReplicationError
from srm.kafka import clients
from srm.replication.clientcache import CACHE, ClientCache
from srm.replication.deliveries import TransactionAborted
from srm.replication.job import CopyJob, CopyRange, Loss, PartitionResult
from srm.replication.kafka_errors import GONE, is_fatal, read_error
from srm.replication.losses import retention_loss, starting_point
from srm.replication.ownership import OWNERS_TAIL_READER, fence_others, latest_ownership, taken_over
from srm.replication.partition_state import PartitionState
from srm.replication.progress import progress_group, read_progress
from srm.replication.provenance import Provenance
from srm.replication.source_reader import SourceReader
from srm.replication.writer import TargetWriter

log = logging.getLogger(__name__)

Key = tuple[str, int]
WHERE_SHOWN = 10  # partitions named in the message of a failure that lasts (the rest counted)


class CopyLoop:
    """A slot's partitions between its source reader (:mod:`srm.replication.source_reader`) and its
    target writer (:mod:`srm.replication.writer`): where each resumes, what was lost, the record
    path from one to the other, and what the source's events mean for a partition's copy."""

    def __init__(self, job: CopyJob, cache: ClientCache = CACHE) -> None:
        self.job = job
        self.cache = cache
        settings = job.flow.settings
        self.fail_on_loss = settings.on_data_loss == "fail"
        self.provenance = (
            Provenance(job.flow.source, job.flow.target, settings.provenance_max_hops)
            if settings.provenance_headers_enabled
            else None
        )
        self.states: dict[Key, PartitionState] = {}
        self.writer = TargetWriter(job, cache, self.where)
        self.reader = SourceReader(job, cache, lambda: {k: s.next_offset for k, s in self.states.items()})
        self.remaining: set[Key] = set()  # available-now: partitions not yet at their planned end
        # Continuous: partitions whose source log changed under the copy (topic deleted or
        # recreated): the driver plans them again at the next lease.
        self.replan: set[Key] = set()
        self.blocking: set[Key] = set()  # partitions with a loss under on_data_loss=fail
        self._check_owner()

    def _check_owner(self) -> None:
        """After the producer started (fencing older instances): does this epoch still own the flow?"""
        latest, _ = latest_ownership(self.writer.target_consumer, self.job.flow, self.job.owners_offset)
        if latest is not None and latest.epoch != self.job.epoch:
            raise taken_over(self.job.flow, self.job.epoch, latest)

    # --- partitions ---------------------------------------------------------------------------
    def add(self, ranges: Iterable[CopyRange]) -> list[PartitionState]:
        """Start copying ``ranges``: resume each from the target's progress, account for losses."""
        ranges = list(ranges)
        if not ranges:
            return []
        keys = [r.key for r in ranges]
        fence = partial(fence_others, self.job)  # a transaction left open holds the read
        progress = read_progress(self._progress_reader(), self._target_admin(), self.job.flow, keys, fence)
        lows = self.reader.log_starts([r.key for r in ranges])
        started = int(time.time() * 1000)
        added = []
        for r in ranges:
            prog = progress.get(r.key)
            result = PartitionResult(r.topic, r.partition, r.target_topic, r.end, started_ms=started)
            committed, committed_id = (prog.next_offset, prog.topic_id) if prog else (None, r.topic_id)
            state = PartitionState(r, result, r.start, committed, r.topic_id, committed_topic_id=committed_id)
            state.journaled = prog is not None and prog.journaled
            state.next_offset, losses = starting_point(r, prog, lows[r.key])
            self._account(state, losses)
            state.origin = state.next_offset
            state.committed_at = time.monotonic()
            self.states[r.key] = state
            added.append(state)
        self.writer.track(list(self.states.values()))
        active = [s for s in added if s.active]
        self.remaining |= {s.range.key for s in active}
        self.reader.assign((s.range.topic, s.range.partition, s.next_offset) for s in active)
        return added

    def remove(self, keys: Iterable[Key]) -> None:
        """Stop copying these partitions (after a commit: their progress is on the target)."""
        gone = [self.states.pop(key) for key in keys if key in self.states]
        self.reader.unassign(s.range.key for s in gone)
        self.remaining -= {s.range.key for s in gone}
        self.replan -= {s.range.key for s in gone}
        self.blocking -= {s.range.key for s in gone}
        self.writer.track(list(self.states.values()))

    def _account(self, state: PartitionState, losses: list[Loss]) -> None:
        state.result.losses.extend(losses)
        for loss in losses:
            log.error("data loss in flow %s: %s", self.job.flow.name, loss)
        if losses and self.fail_on_loss:
            state.blocked = True
            self.blocking.add(state.range.key)

    @property
    def blocked(self) -> bool:
        """A loss under on_data_loss=fail: the driver must stop the flow. (Asked at every step of a
        continuous copier: a set kept as losses come, not a scan of every partition.)"""
        return bool(self.blocking)

    # --- copying ------------------------------------------------------------------------------
    def step(self, wait_s: float) -> int:
        """Copy what the reader holds; wait up to ``wait_s`` for a first record if it holds none."""
        messages = self.reader.consume(wait_s)
        if messages:
            try:
                self._handle(messages)
            except TransactionAborted as exc:  # a record refused once the transaction had failed
                self.aborted(exc)
                return len(messages)
        self.writer.producer.poll(0)
        return len(messages)

    def aborted(self, exc: TransactionAborted) -> None:
        """The open transaction failed: abort it, count the failure against the flow's
        errors.retry.timeout (LastingFaultError past it), and read again from the committed progress."""
        self.writer.abort()
        self.writer.outage.failed(str(exc), self.job.flow.settings.errors_retry_timeout_ms, self.where, exc.waited_s)
        self.rewind()

    def commit(self, *, settle: Iterable[Key] = ()) -> None:
        """Commit what was copied; ``settle``: and a plain progress record of these partitions
        (srm.replication.progress), as they leave this copier or it stops."""
        self.writer.commit(list(self.states.values()), settle={self.states[k] for k in settle if k in self.states})

    def rewind(self) -> None:
        """After an aborted transaction: every partition reads again from its committed progress."""
        if not self.writer.usable:  # the abort failed and the producer was dropped: start a new one
            self.writer.release()
            self.writer = TargetWriter(self.job, self.cache, self.where)
            self.writer.track(list(self.states.values()))
            self._check_owner()
        assigned = self.reader.assigned()
        for state in self.states.values():
            offset = state.rewind()
            if state.range.key in assigned and not state.blocked:
                self.reader.seek(state.range.key, offset, resume=True)
                self.remaining.add(state.range.key)

    def results(self) -> list[PartitionResult]:
        finished = int(time.time() * 1000)
        for state in self.states.values():
            state.result.next_offset = state.committed if state.committed is not None else state.range.start
            state.result.finished_ms = finished
        return [s.result for s in self.states.values()]

    def close(self) -> None:
        """The task is over: abort what is open, give the reader's partitions back."""
        self.writer.abort()
        self.writer.release()
        self.reader.close()

    def _handle(self, messages: list[Any]) -> None:
        """The per-record path (profiled in bench/REPORT.md): ``consume`` hands out each partition's
        records in runs, as they were fetched, so a partition's state, target and producer are looked
        up once per run, and counts, sizes and ages are added up per run."""
        polled_ms = time.time() * 1000
        start, topic, partition = 0, "", -1
        for i, message in enumerate(messages):
            if message.partition() != partition or message.topic() != topic:
                if i:
                    self._copy_run(self.states.get((topic, partition)), messages[start:i], polled_ms)
                start, topic, partition = i, message.topic(), message.partition()
        if messages:
            self._copy_run(self.states.get((topic, partition)), messages[start:], polled_ms)

    def _copy_run(self, state: PartitionState | None, run: list[Any], polled_ms: float) -> None:
        """Copy a run of one partition's records (and events), in order."""
        if state is None or state.done:
            return
        produced, stamps = state.produced, state.stamps
        first, first_stamp = len(produced), len(stamps)
        size = self._copy_records(state, run)
        moved = len(produced) - first
        if moved:
            self.writer.produced(moved, size)
            state.result.copied(produced[first], state.next_offset - 1, moved, size)
            state.result.record_age.add_ages(polled_ms, stamps[first_stamp:])

    def _copy_records(self, state: PartitionState, run: list[Any]) -> int:  # noqa: C901 - the per-record loop, see below
        """The records of ``run`` produced to the target (the writer's part of the record path
        inlined: a Python call per record is a share of the copy's time that shows, bench/REPORT.md
        "Profile"); the size of their values."""
        writer, provenance = self.writer, self.provenance
        r = state.range
        end, target_topic, partition = r.end, r.target_topic, r.partition
        produce, report = writer.producer.produce, writer.reporters[state]
        produced, stamps = state.produced, state.stamps
        size = 0
        for message in run:
            error = message.error()
            if error is not None:
                self._event(state, message, error)
                if state.done:
                    break
                continue
            offset = message.offset()
            if offset >= end:
                self._finish(state, end)
                break
            headers = message.headers()  # None for none: an empty list costs the producer an allocation
            # The provenance rule says None for a record that came from the target or is past the hop
            # limit: it is not copied, a gap in the runs, as an aborted record.
            if provenance is None or (headers := provenance.headers(headers)) is not None:
                if not writer.in_transaction:
                    writer.begin_with(state)
                value, timestamp = message.value(), message.timestamp()[1]
                try:
                    produce(
                        target_topic,
                        value,
                        key=message.key(),
                        partition=partition,
                        on_delivery=report,
                        timestamp=timestamp if timestamp > 0 else 0,  # 0: now, for a record without one
                        headers=headers,
                    )
                except Exception as exc:
                    writer.send_again(state, message, timestamp, headers, exc)
                produced.append(offset)
                if timestamp > 0:
                    stamps.append(timestamp)
                if value:
                    size += len(value)
            state.next_offset = offset + 1
            if offset + 1 >= end:
                self._finish(state, end)
                break
        return size

    def _event(self, state: PartitionState, message: Any, error: Any) -> None:
        name = error.name()
        r = state.range
        if name == "_PARTITION_EOF":
            if state.open_ended:
                return  # caught up; more will come
            # Everything below the partition's end has been delivered (read_committed: the LSO).
            if message.offset() >= r.end:
                self._finish(state, r.end)
            else:  # the log ends below the plan (truncated or recreated): the next batch re-plans
                log.warning("%s[%d] ends at %d, below the planned %d", r.topic, r.partition, message.offset(), r.end)
                self._finish(state, None)
            return
        if name in ("_AUTO_OFFSET_RESET", "OFFSET_OUT_OF_RANGE"):
            self._out_of_range(state)
            return
        if name in GONE and state.open_ended:
            self._set_aside(state, f"{name}: the topic was deleted or is being recreated")
            return
        if is_fatal(error) or name.endswith("AUTHORIZATION_FAILED") or name in GONE:
            raise read_error(
                error, source_cluster=self.job.source, topic=r.topic, partition=r.partition, offset=state.next_offset
            )
        log.warning("reading %s[%d]: %s (retrying)", r.topic, r.partition, error.str())

    def _out_of_range(self, state: PartitionState) -> None:
        """Retention deleted records while we were reading them."""
        r = state.range
        low = self.reader.log_starts([r.key])[r.key]
        if low <= state.next_offset:
            if state.open_ended:  # the log got shorter: recreated; the next lease plans it again
                self._set_aside(state, f"offset {state.next_offset} is beyond the log, which starts at {low}")
                return
            raise ReplicationError(
                f"offset {state.next_offset} of topic {r.topic!r} partition {r.partition} "
                f"is out of range on {self.job.source.alias} although the log starts at {low}"
            )
        self._account(state, [retention_loss(r, state.next_offset, low)])
        if state.blocked:
            self._finish(state, None)
            return
        state.next_offset = low
        if low >= r.end:
            self._finish(state, r.end)
        else:
            self.reader.seek(r.key, low)

    def _set_aside(self, state: PartitionState, why: str) -> None:
        """Continuous: stop reading a partition whose log changed under the copy until re-planned."""
        log.warning("%s[%d]: %s; it is planned again at the next lease", state.range.topic, state.range.partition, why)
        self.replan.add(state.range.key)
        self._finish(state, None)

    def _finish(self, state: PartitionState, end: int | None) -> None:
        if end is not None and not state.blocked:
            state.next_offset = max(state.next_offset, end)
        state.done = True
        self.remaining.discard(state.range.key)
        self.reader.pause(state.range.key)

    def where(self) -> str:
        """The slot, its target and the partitions it holds with their committed offsets: the
        message of a failure that lasts (srm.replication.outage)."""
        held = sorted(self.states.items())
        shown = ", ".join(
            f"{t}[{p}] at offset {s.committed if s.committed is not None else s.next_offset}"
            for (t, p), s in held[:WHERE_SHOWN]
        )
        more = f" and {len(held) - WHERE_SHOWN} more" if len(held) > WHERE_SHOWN else ""
        t = self.job.target
        return (
            f"flow {self.job.flow.name}: slot {self.job.slot} writing to {t.alias} ({t.describe()}), "
            f"copying {shown or 'no partition'}{more} from {self.job.source.alias}"
        )

    # --- target clients -----------------------------------------------------------------------
    def _progress_reader(self) -> Any:
        def build() -> Any:
            return clients.settled(clients.reader(self.job.target, progress_group(self.job.flow.source)))

        return self.cache.client(("progress", self.job.flow.name), build, self.writer.digest)

    def owners_reader(self) -> Any:
        """The consumer a continuous copier follows the ownership records with (OwnerTail)."""

        def build() -> Any:
            return clients.settled(
                clients.consumer(self.job.target, progress_group(self.job.flow.source), **OWNERS_TAIL_READER)
            )

        return self.cache.client(("owners-tail", self.job.flow.name), build, self.writer.digest)

    def _target_admin(self) -> Any:
        return self.cache.client(
            ("target-admin", self.job.flow.name),
            lambda: clients.settled(clients.admin_client(self.job.target)),
            self.writer.digest,
        )


def commit_or_rewind(loop: CopyLoop, *, settle: Iterable[Key] = ()) -> bool:
    """Commit; after an aborted transaction rewind every partition instead. True if committed.
    Aborted transactions that go on past the flow's errors.retry.timeout: LastingFaultError."""
    try:
        loop.commit(settle=settle)
    except TransactionAborted as exc:
        loop.aborted(exc)
        return False
    return True


def worker_logging() -> None:
    """In a Spark Python worker: the copier's lines go to the executor's log, as the driver's do."""
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        logging.getLogger("py4j").setLevel(logging.WARNING)
