"""Which progress records a continuous copier writes when its progress is journaled (no broker)."""

from __future__ import annotations

from srm.replication.job import OPEN_END, CopyRange, PartitionResult
from srm.replication.journal import PROGRESS_EVERY_S, HistoryMark, ProgressJournal
from srm.replication.partition_state import PartitionState


def state(partition: int, committed: int, next_offset: int, *, journaled: bool, progress_at: float) -> PartitionState:
    r = CopyRange("t", partition, 0, OPEN_END, "id", "X.t")
    s = PartitionState(r, PartitionResult("t", partition, "X.t", OPEN_END), next_offset, committed, "id")
    s.journaled, s.progress_at = journaled, progress_at
    return s


def test_a_quiet_partition_gets_its_plain_record_once_its_journaled_one_is_old_enough() -> None:
    now = 100.0
    recent = state(0, 50, 50, journaled=True, progress_at=now - 0.5)
    old = state(1, 50, 50, journaled=True, progress_at=now - PROGRESS_EVERY_S)
    moving = state(2, 50, 60, journaled=True, progress_at=now - 10)  # records not committed yet
    plain = state(3, 50, 50, journaled=False, progress_at=now - 10)  # its latest is the last word already
    assert ProgressJournal.quiet([recent, old, moving, plain], now) == [old]
    assert ProgressJournal.quiet([recent, old, moving, plain], now, settle=[recent]) == [recent, old]


def test_a_partition_blocked_by_a_loss_gets_a_plain_record_at_once_where_copying_stopped() -> None:
    """Its position must not depend on the history, which retention deletes in time; it names the
    offset before the loss, so the loss is reported again when the flow starts again."""
    blocked = state(0, 40, 90, journaled=True, progress_at=100.0)  # resumed at 40, the source begins at 90
    blocked.blocked = True
    assert ProgressJournal.quiet([blocked], 100.0) == [blocked]
    assert blocked.position == (40, "id")
    copying = state(1, 40, 45, journaled=False, progress_at=0.0)
    assert copying.position == (45, "id")
    blocked.journaled = False  # its plain record is written: nothing more
    assert ProgressJournal.quiet([blocked], 200.0) == []


def test_a_partition_blocked_by_a_recreated_topic_keeps_the_old_topic_id_in_its_record() -> None:
    """Its progress names the old topic's offset: with the new topic's id the next start would see
    no recreation and carry on from an offset of another log."""
    recreated = state(0, 500, 0, journaled=True, progress_at=100.0)  # the new topic starts at 0
    recreated.committed_topic_id, recreated.blocked = "old-id", True
    assert recreated.position == (500, "old-id")
    recreated.blocked = False  # on_data_loss: continue: copying goes on in the new topic
    assert recreated.position == (0, "id")
    recreated.committed_now(1.0)
    assert recreated.committed_topic_id == "id"


def test_the_history_mark_follows_the_acknowledgements_and_sees_a_recreated_topic() -> None:
    mark = HistoryMark()
    assert mark.value == -1
    assert not mark.acked(7) and mark.value == 8
    assert not mark.acked(8) and not mark.acked(12) and mark.value == 13
    assert mark.acked(0)  # deleted and created again: offsets start over
    assert mark.value == 1  # the journaled records written from now on read the new history
    assert not mark.acked(1)
    assert mark.acked(1)  # an offset it had already: only a log that started over gives it again
    assert mark.restarts == 2  # the writer restates its journaled partitions until a commit did it


def test_a_restatement_is_pending_from_a_new_writer_or_a_restart_until_a_commit_did_it() -> None:
    """Journaled records may name a history that is gone when the history restarted, and a new
    writer cannot tell: either way the copier commits plain records without waiting for data."""
    written: list[tuple[int, int]] = []
    journal = ProgressJournal(True, lambda s, at: written.append((s.range.partition, at)))
    journaled = state(0, 50, 50, journaled=True, progress_at=100.0)
    plain = state(1, 50, 50, journaled=False, progress_at=100.0)
    assert journal.restate_pending([journaled, plain])  # new: nothing committed by it yet
    assert journal.restate([journaled, plain], (), journal.mark.restarts) == [journaled]
    assert written == [(0, -1)]  # its plain record, in the transaction that restates
    journal.restated = journal.mark.restarts  # as a commit that restated does
    assert not journal.restate_pending([journaled, plain])
    journal.mark.acked(40)
    journal.mark.acked(0)  # the topic started over
    assert journal.restate_pending([journaled])
    assert not journal.restate_pending([plain])  # nothing names the history: nothing to restate
    assert journal.restated == 1 and not journal.restate_pending([journaled])
    available_now = ProgressJournal(False, lambda s, at: written.append((s.range.partition, at)))
    assert not available_now.restate_pending([journaled])  # every record is plain
    assert available_now.history_from() == -1 and journal.history_from() == 1
