"""The state of one source partition inside a copy task."""

from __future__ import annotations

from dataclasses import dataclass, field

from srm.replication.job import CopyRange, PartitionResult
from srm.replication.runs import RunTracker


@dataclass(eq=False)  # identity: the copy loop keys dicts by state
class PartitionState:
    range: CopyRange
    result: PartitionResult
    next_offset: int  # the next source offset to copy
    committed: int | None  # progress on the target when the task started / after the last commit
    topic_id: str
    blocked: bool = False  # data loss under on_data_loss=fail: neither copy nor commit
    done: bool = False
    tracker: RunTracker = field(default_factory=RunTracker)
    # The records produced since the last commit, in produce order: their source offsets, their
    # CreateTimes (of those that have one) and the target offsets acknowledged so far (a
    # transactional/idempotent producer acknowledges one partition's records in order, so
    # acked[i] belongs to produced[i]).
    produced: list[int] = field(default_factory=list)
    stamps: list[int] = field(default_factory=list)
    acked: list[int] = field(default_factory=list)

    @property
    def target(self) -> tuple[str, int]:
        return (self.range.target_topic, self.range.partition)

    @property
    def dirty(self) -> bool:
        """Progress differs from what the target has: it must be committed."""
        return not self.blocked and self.next_offset != self.committed

    @property
    def active(self) -> bool:
        return not self.blocked and not self.done and self.next_offset < self.range.end
