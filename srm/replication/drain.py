"""Available-now: a slot's ranges copied up to their planned ends in one Spark task, committing in
chunks (:class:`srm.replication.copier.CopyLoop` does the copying)."""

from __future__ import annotations

import time
from typing import Any

from srm.errors import LastingFaultError, ReplicationError
from srm.replication.clientcache import CACHE, ClientCache
from srm.replication.copier import CopyLoop, commit_or_rewind, worker_logging
from srm.replication.heap import fix_mmap_threshold
from srm.replication.job import CopyJob, PartitionResult, fault_payload

# Available-now: with data behind it, a fetch returns within milliseconds; this long without any
# record or end-of-partition event means the source cluster is gone or the partition has no leader.
STALL_TIMEOUT_S = 90.0


def copy_to_end(
    job: CopyJob, cache: ClientCache = CACHE, faults: list[LastingFaultError] | None = None
) -> list[PartitionResult]:
    """Available-now: copy the slot's ranges up to their planned ends, committing in chunks. A
    LastingFaultError is raised, or, given ``faults``, added there and what was committed before it
    returned (its chunks' metrics and offset runs)."""
    loop = CopyLoop(job, cache)
    try:
        loop.add(job.ranges)
        last_activity = time.monotonic()
        while True:
            while loop.remaining:
                if loop.step(0.05):
                    last_activity = time.monotonic()
                elif time.monotonic() - last_activity > STALL_TIMEOUT_S:
                    raise stalled(loop)
                if loop.writer.chunk_full():
                    commit_or_rewind(loop)
            if commit_or_rewind(loop):  # else the aborted chunk is copied again
                break
    except LastingFaultError as exc:
        if faults is None:
            raise
        faults.append(exc)
    finally:
        loop.close()
    return loop.results()


def stalled(loop: CopyLoop) -> ReplicationError:
    waiting = ", ".join(f"{t}[{p}] at offset {loop.states[(t, p)].next_offset}" for t, p in sorted(loop.remaining))
    return ReplicationError(
        f"no record from {loop.job.source.alias} ({loop.job.source.describe()}) for {STALL_TIMEOUT_S:.0f} s while "
        f"copying {waiting}: is the source cluster reachable and does every partition have a leader?"
    )


def run_slot(job: CopyJob) -> list[dict[str, Any]]:
    """Entry point of an available-now Spark task: one payload per partition."""
    worker_logging()
    fix_mmap_threshold()
    faults: list[LastingFaultError] = []
    try:
        payloads = [result.payload() for result in copy_to_end(job, faults=faults)]
    except LastingFaultError as exc:  # before anything was copied (the producer could not start)
        return [fault_payload(str(exc))]
    return [*payloads, *(fault_payload(str(f)) for f in faults)]
