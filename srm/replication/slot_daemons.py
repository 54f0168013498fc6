"""Spark's Python daemons of copy slots that are no longer used, stopped.

Each copy slot runs in a Python worker of its own environment (``SLOT_VARIABLE`` names the slot,
see :mod:`srm.replication.batch`), and Spark keeps one ``pyspark.daemon`` per environment (about
35 MiB) for as long as the application runs, whether or not a task of that environment ever comes
again. When ``tasks.max`` is lowered, the daemons of the slots above it would stay until the driver
stops (bench.soak: +35 MiB after each ``tasks.max`` 2 -> 3 -> 2).

In local mode the executor is the driver's JVM, so the driver stops them: a slot unused for
``RETIRE_AFTER_S`` has its daemon terminated (its workers go with it). Spark closes an idle
worker itself after a minute, checks that an idle worker is alive before it reuses one, and starts
a daemon again when it cannot reach it, so a slot that comes back later gets a fresh daemon.
On a cluster the executors' JVMs are elsewhere and their daemons stay, one per slot ever used,
bounded by the highest ``tasks.max``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

log = logging.getLogger(__name__)

SLOT_VARIABLE = "SRM_COPY_SLOT"
# A copier without a renewal stops 30 s after its lease ended (resident.GRACE_S), Spark closes an
# idle worker after 60 s without a task of its environment, and looks every 10 s: well after both.
RETIRE_AFTER_S = 150.0
DAEMON_MODULE = "pyspark.daemon"


def slot_value(flow: str, slot: int) -> str:
    """The value of SLOT_VARIABLE in the environment of ``flow``'s ``slot``."""
    return f"{flow}#{slot}"


class SlotDaemons:
    """The slots a flow's leases use, and when each was last used."""

    def __init__(self, flow: str, jvm_pid: int | None) -> None:
        self.flow = flow
        self.jvm_pid = jvm_pid  # the executor's JVM, when it is the driver's (local mode); else None
        self.last_used: dict[int, float] = {}

    def used(self, slots: Iterable[int], now: float | None = None) -> list[int]:
        """Note the slots of a lease; stop the daemons of slots unused for RETIRE_AFTER_S. The pids
        terminated."""
        now = time.monotonic() if now is None else now
        for slot in slots:
            self.last_used[slot] = now
        retired = sorted(s for s, at in self.last_used.items() if now - at >= RETIRE_AFTER_S)
        for slot in retired:
            del self.last_used[slot]
        if not retired or self.jvm_pid is None:
            return []
        stopped = stop_daemons(self.jvm_pid, {slot_value(self.flow, s) for s in retired})
        if stopped:
            log.info(
                "flow %s: slot(s) %s unused for %.0f s (tasks.max lowered): their Python daemon(s) %s stopped",
                *(self.flow, ", ".join(map(str, retired)), RETIRE_AFTER_S, ", ".join(map(str, stopped))),
            )
        return stopped


def stop_daemons(jvm_pid: int, slots: set[str]) -> list[int]:
    """Terminate the ``pyspark.daemon`` children of ``jvm_pid`` whose SLOT_VARIABLE is one of
    ``slots``; their pids."""
    import psutil  # the driver's; the copiers' workers import this module without using it

    stopped = []
    try:
        children = psutil.Process(jvm_pid).children()
    except psutil.Error:
        return []
    for child in children:
        try:
            if DAEMON_MODULE not in child.cmdline() or child.environ().get(SLOT_VARIABLE) not in slots:
                continue
            child.terminate()
            stopped.append(child.pid)
        except psutil.Error:  # gone meanwhile, or not ours to read
            continue
    return stopped
