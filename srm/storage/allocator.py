"""Where the memory of Arrow's buffers comes from, in every process that reads the warehouse."""

from __future__ import annotations

import functools


@functools.cache
def system_allocator() -> str:
    """Have Arrow's buffers (every table this process reads or builds) come from glibc's malloc,
    not pyarrow's default mimalloc; the allocator's name. A checkpoint pass, which reads the
    history of every partition the groups are on, peaked 40-100 MiB higher with mimalloc for the
    same ~50 MiB of buffers at most, and spent as much CPU or more (docs/benchmarks/lab-notes.md,
    Endurance). Once per process, before the first read."""

    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    return str(pa.default_memory_pool().backend_name)
