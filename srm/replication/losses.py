"""Records the source no longer has: where a partition's copy starts, and what was lost before it.

A partition resumes at its committed progress on the target. Two things can have taken records
from under it since: the source's retention (or deleted records), which moved the log's start
past the progress, and a deletion and recreation of the topic (another topic id), which restarted
its offsets. Either is a :class:`~srm.replication.job.Loss` with its exact offset range; the flow's
``on_data_loss`` decides what the copier does with it.
"""

from __future__ import annotations

from srm.replication.job import OPEN_END, CopyRange, Loss
from srm.replication.progress import Progress

RETENTION = "were removed from the source (retention or deleted records) before they were copied"


def starting_point(r: CopyRange, progress: Progress | None, log_start: int) -> tuple[int, list[Loss]]:
    """The source offset copying of ``r`` starts at, given its committed ``progress`` on the
    target and the source log's ``log_start``, and the losses on the way there."""
    losses = []
    start = r.start
    if progress is not None and progress.topic_id and r.topic_id and progress.topic_id != r.topic_id:
        # Deleted and created again: offsets restart, and whatever the old topic held past our
        # progress is gone. What was planned is known; records written after the last plan
        # cannot be, so a recreation is always reported, even when no lost offset is known.
        old_end = max(progress.next_offset, r.start) if r.end != OPEN_END else progress.next_offset
        reason = (
            f"of the old topic were lost when it was deleted and recreated (topic id {progress.topic_id} -> "
            f"{r.topic_id}; records written after the last plan are not known)"
        )
        losses.append(Loss(r.topic, r.partition, progress.next_offset, old_end, reason))
        start = log_start
    elif progress is not None:
        start = progress.next_offset
    if start < log_start:
        losses.append(Loss(r.topic, r.partition, start, log_start, RETENTION))
        start = log_start
    return start, losses


def retention_loss(r: CopyRange, position: int, log_start: int) -> Loss:
    """Retention deleted records at ``position`` while they were being read."""
    return Loss(r.topic, r.partition, position, log_start, RETENTION)
