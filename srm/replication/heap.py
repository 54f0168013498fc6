"""The C heap of the project's long-lived replication processes (copier workers, the driver): how
large buffers are served, and giving freed pages back to the system. Both measured in bench.soak
(docs/benchmarks/lab-notes.md, Endurance)."""

from __future__ import annotations

import ctypes
import functools

# mallopt's parameter (glibc's malloc.h) and the value it is fixed at: glibc's own starting value.
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 128 * 1024


@functools.cache
def fix_mmap_threshold() -> bool:
    """Serve every C allocation of MMAP_THRESHOLD_BYTES or more with a mapping of its own, given
    back to the system when freed, for the life of the process; True if set (glibc only).

    glibc starts with this threshold but raises it to the size of every such block freed, up to
    32 MiB: once an outage's or a catch-up's buffers (librdkafka's fetch responses and produce
    batches, up to megabytes each) have come and gone, later ones are carved from the arenas, and
    the small allocations that come after them land in between, so the arenas' pages stay taken
    when the buffers are freed, which ``trim_heap`` cannot give back. In bench.soak a copier
    worker's RSS stepped up 13 MiB for good at a 60 s freeze of the target; a worker with the
    threshold fixed, in the same run, 3.4 MiB. A mapping per large buffer costs a system call and
    its pages' first touch, next to nothing at the copier's buffer sizes."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
    except (OSError, AttributeError):
        return False


def trim_heap() -> None:
    """Give the C heap's free pages back to the system (glibc's malloc_trim, as Dask's workers do for
    "unmanaged memory"). During an outage librdkafka holds the records it could not deliver (up to
    its queue's 64 MiB, srm.replication.producers.PRODUCER_SETTINGS); once they are gone, glibc keeps
    the pages it freed, and a worker's RSS stepped up by 10-25 MiB for good at each restart of the
    target in bench.soak. Called as an outage ends and at each lease's hand-over
    (srm.replication.resident), and on the driver after each lease (srm.replication.run_loop); it takes
    microseconds. A no-op where the C library is not glibc."""
    try:
        libc = ctypes.CDLL("libc.so.6")
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        return
