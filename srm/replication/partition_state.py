"""The state of one source partition inside a copy task."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from srm.replication.job import OPEN_END, CopyRange, PartitionResult
from srm.replication.runs import RunTracker


def int64s() -> array[int]:
    """A growing sequence of 64-bit integers in one buffer: 8 bytes a record, where a list holds a
    pointer and a 32-byte int object per record. A transaction's records wait here for their
    acknowledgements, up to ~200,000 of them in flight during an outage (librdkafka's queue):
    5 MB where lists took ~26 MB, which stayed in the worker's heap after the outage."""
    return array("q")


@dataclass(eq=False)  # identity: the copy loop keys dicts by state
class PartitionState:
    range: CopyRange
    result: PartitionResult
    next_offset: int  # the next source offset to copy
    committed: int | None  # progress on the target when the task started / after the last commit
    topic_id: str
    blocked: bool = False  # data loss under on_data_loss=fail: neither copy nor commit
    done: bool = False
    origin: int = 0  # where copying began when nothing was committed yet (a rewind goes back here)
    committed_at: float = 0.0  # monotonic time of the last commit of this partition's progress
    tracker: RunTracker = field(default_factory=RunTracker)
    # The records produced since the last commit, in produce order: their source offsets, their
    # CreateTimes (of those that have one) and the target offsets acknowledged so far (a
    # transactional/idempotent producer acknowledges one partition's records in order, so
    # acked[i] belongs to produced[i]).
    produced: array[int] = field(default_factory=int64s)
    stamps: array[int] = field(default_factory=int64s)
    acked: array[int] = field(default_factory=int64s)
    saved: tuple[int, int] = (0, 0)  # result.records and result.bytes at the last commit
    # The partition's latest progress record on the target is journaled (its history may hold a
    # later position, srm.replication.progress), written at monotonic time progress_at.
    journaled: bool = False
    progress_at: float = float("-inf")
    # The topic id the committed progress names: a source topic deleted and created again has
    # another one than ``topic_id`` until this task commits progress of its own.
    committed_topic_id: str = ""

    @property
    def target(self) -> tuple[str, int]:
        return (self.range.target_topic, self.range.partition)

    @property
    def dirty(self) -> bool:
        """Progress differs from what the target has: it must be committed."""
        return not self.blocked and self.next_offset != self.committed

    @property
    def settled(self) -> bool:
        """Everything read is committed and the position is the partition's own (no loss pending)."""
        return not self.blocked and self.next_offset == self.committed

    @property
    def position(self) -> tuple[int, str]:
        """The offset and topic id its progress record names: where copying goes on, or for a
        partition blocked by a data loss, the committed progress as it was found (offset and topic
        id, of a topic since recreated too), so the next start reports the same loss again."""
        if self.blocked and self.committed is not None:
            return self.committed, self.committed_topic_id or self.topic_id
        return self.next_offset, self.topic_id

    @property
    def active(self) -> bool:
        return not self.blocked and not self.done and self.next_offset < self.range.end

    @property
    def open_ended(self) -> bool:
        """Continuous mode: copy whatever arrives, never finish at a planned end."""
        return self.range.end == OPEN_END

    def committed_now(self, at: float) -> None:
        """The progress and records since the last commit are on the target now."""
        self.committed = self.next_offset
        self.committed_topic_id = self.topic_id
        self.committed_at = at
        self.saved = (self.result.records, self.result.bytes)

    def forget_acknowledged(self) -> None:
        """The produced records and their acknowledgements are accounted for (or aborted)."""
        del self.produced[:]  # an array has no clear(); this frees its buffer
        del self.acked[:]

    def forget_stamps(self) -> None:
        del self.stamps[:]

    def rewind(self) -> int:
        """Forget what was produced since the last commit (its transaction was aborted); returns
        the offset to read from again."""
        self.next_offset = self.committed if self.committed is not None else self.origin
        self.forget_acknowledged()
        self.forget_stamps()
        if (self.result.records, self.result.bytes) != self.saved:  # the aborted transaction held some
            self.result.aborted += 1
        self.result.records, self.result.bytes = self.saved
        self.done = False
        return self.next_offset
