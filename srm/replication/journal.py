"""When a transaction writes a partition's progress record, and whether it is journaled.

Continuous exactly-once copying does not write a progress record in every transaction: each
transaction holds a history record per partition it moved, with the same next offset, and a
*journaled* progress record names the history offset from which those may follow
(:mod:`srm.replication.progress`). :class:`ProgressJournal` decides, per transaction, which
partitions get a record and of which kind; the writer produces them. Without journaling
(available-now, or at-least-once) every moved partition gets a plain record in every transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from srm.replication.partition_state import PartitionState

# Continuous mode writes a partition's progress record at most this often while it is copied, and
# a plain one this long after it went quiet: the history records in between hold the position
# (srm.replication.progress), so most transactions leave the progress topic out, which saves the
# target a Produce, a partition verification and a commit marker per transaction.
PROGRESS_EVERY_S = 2.0


class HistoryMark:
    """One past the latest history offset a writer's records got (-1: none yet): every history
    record it writes later lands at or after it, the ``history_from`` of its journaled progress.

    A writer's records land one after the other (a transaction's history is acknowledged before
    its commit, and the next transaction starts after that), so an offset below the mark means
    the history topic was deleted and created again under the copier: its offsets start over, and
    every journaled progress record names a history that is gone. ``restarts`` counts them.
    """

    def __init__(self) -> None:
        self.value = -1
        self.restarts = 0

    def acked(self, offset: int) -> bool:
        """A history record landed at ``offset``; True if the history topic started over."""
        restarted = offset < self.value
        self.value = offset + 1
        self.restarts += restarted
        return restarted


class ProgressJournal:
    """The journaling decisions of one writer. ``enabled``: continuous exactly-once (else every
    record is plain); ``write(state, history_from)``: produce the progress record of ``state``,
    journaled from ``history_from`` when it is >= 0."""

    def __init__(self, enabled: bool, write: Callable[[PartitionState, int], None]) -> None:
        self.enabled = enabled
        self.mark = HistoryMark()
        # The history's restarts a committed transaction restated (restate). A new writer cannot
        # tell whether the history went on from the offsets its partitions' journaled records name
        # (one built after a dropped producer may follow the topic's deletion), so its first
        # commit restates them.
        self.restated = -1
        self._write = write

    def history_from(self) -> int:
        """Where the journaled records of this transaction say later history records start."""
        return self.mark.value if self.enabled else -1

    def due(self, state: PartitionState, now: float) -> bool:
        """Does this transaction write the progress of ``state`` (moved by it)? Always when it is
        plain (a reader takes it as the last word), else every PROGRESS_EVERY_S."""
        return not self.enabled or not state.journaled or state.progress_at <= now - PROGRESS_EVERY_S

    @staticmethod
    def quiet(
        states: Sequence[PartitionState], now: float, settle: Collection[PartitionState] = ()
    ) -> list[PartitionState]:
        """Partitions not moved since their latest progress record, a journaled one, whose plain
        one is due: PROGRESS_EVERY_S after it, or now for those in ``settle``; and, at once, those
        blocked by a data loss (copying stopped: their position must not depend on the history,
        which retention deletes in time)."""
        since = now - PROGRESS_EVERY_S
        return [
            s for s in states if s.journaled and (s.blocked or (s.settled and (s in settle or s.progress_at <= since)))
        ]

    def settle_due(self, states: Sequence[PartitionState], now: float) -> bool:
        """A quiet partition's latest progress record is journaled: time for a plain one; or a
        restatement is pending, which must not wait for more records."""
        return (self.enabled and bool(self.quiet(states, now))) or self.restate_pending(states)

    def restate_pending(self, states: Sequence[PartitionState]) -> bool:
        """The history restarted, or this writer is new, and no commit restated it yet: True if a
        partition's latest progress record is journaled (else there is nothing to restate)."""
        if not self.enabled or self.mark.restarts <= self.restated:
            return False
        if any(s.journaled for s in states):
            return True
        self.restated = self.mark.restarts  # every latest record is plain: none names the history
        return False

    def restate(
        self, states: Sequence[PartitionState], due: Collection[PartitionState], restarts: int
    ) -> list[PartitionState]:
        """The history started over (HistoryMark; learnt at the latest from the flush before, which
        acknowledges the transaction's opener), or this writer is new: the journaled progress
        records, those just written included, may name a history that is gone. A plain record for
        each of them, in this transaction (the last word until the next one). Until a transaction
        doing this commits, every transaction does it: an aborted one leaves the journaled records
        as they were. ``restarts``: the history's restarts seen so far; none new: nothing to do."""
        if not self.enabled or restarts <= self.restated:
            return []
        restated = [s for s in states if s.journaled or s in due]
        for state in restated:
            self._write(state, -1)
        return restated

    @staticmethod
    def recorded(
        due: list[PartitionState],
        plain: list[PartitionState],
        *,
        journaled_from: int,
        settle: Collection[PartitionState],
        now: float,
    ) -> None:
        """What the progress topic holds now for each partition whose record a transaction wrote:
        ``due`` journaled from ``journaled_from`` (plain when it is -1 or for those in ``settle``),
        ``plain`` plain (written last)."""
        for state in due:
            state.journaled, state.progress_at = journaled_from >= 0 and state not in settle, now
        for state in plain:
            state.journaled, state.progress_at = False, now
