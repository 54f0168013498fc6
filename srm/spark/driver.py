"""A replication job's Python driver under ``spark-submit``: the stop signals are its alone.

In client mode spark-submit's JVM starts the job's Python driver as its child. A SIGTERM or SIGINT
sent to their whole process group (Airflow's supervisor ends a task it was told to end so, and
``kill -- -PGID`` and Ctrl-C do too) reached the JVM as well, whose shutdown hook stopped Spark's
context while the driver was stopping gracefully: the running copy job was cancelled before its
copiers committed (their transactions aborted; the next run copies those records again, once) and
the log ended with "the replication stopped on an unexpected error". So a replication job's
spark-submit starts with both signals ignored (:func:`ignoring`), and HotSpot keeps them so (it
installs no handler for a signal ignored at its start); the driver, which inherits them ignored,
installs its own handlers first thing (srm/jobs/replicate.py), stops after the copiers commit and
exits, and spark-submit's JVM ends with it. Spark's Python workers, where the copiers run, are
outside that process group (``pyspark.daemon`` makes its own), but not outside a systemd unit's
cgroup: a unit that runs ``srm-control run`` needs ``KillMode=mixed``, which sends SIGTERM to the
main process alone.

Stopping such a job from outside (an Airflow task's ``on_kill``): SIGTERM to its Python driver, a
bounded wait for spark-submit to end, then SIGKILL to both. ``srm-control run`` stays the parent of
its spark-submit (:func:`run`) and turns the stop signals it gets into that SIGTERM.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# A command run with SIGINT and SIGTERM ignored: a shell ignores them and execs it, which keeps them
# ignored. No preexec_fn: the caller may have threads (an Airflow task), and a fork that runs Python
# before exec runs its at-fork hooks too.
IGNORING = ("/bin/sh", "-c", 'trap "" INT TERM; exec "$0" "$@"')
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent ends
GRACEFUL_JOBS = ("replicate.py",)  # the jobs whose driver stops gracefully on SIGTERM and SIGINT


def stops_gracefully(application: str) -> bool:
    """Does the job ``application`` (a path to a script of srm/jobs) stop gracefully on a signal?"""
    return Path(application).name in GRACEFUL_JOBS


def ignoring(command: list[str]) -> list[str]:
    """``command`` started with the stop signals ignored (a graceful job's spark-submit)."""
    return [*IGNORING, *command]


def python_driver(submit_pid: int, application: str) -> psutil.Process | None:
    """The job's Python driver: the process under spark-submit (``submit_pid``) that runs
    ``application`` as its script (not spark-class's launcher, which names it among its arguments)."""
    name = Path(application).name
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process(submit_pid).children(recursive=True):
            with contextlib.suppress(psutil.Error, IndexError):
                if Path(child.cmdline()[1]).name == name:
                    return child
    return None


def stop(submit: subprocess.Popen[Any], application: str, grace_s: float) -> bool:
    """SIGTERM to the job's Python driver, then up to ``grace_s`` for spark-submit to end. False if
    it has not ended (or no driver was found): the caller kills it."""
    if submit.poll() is not None:
        return True
    driver = python_driver(submit.pid, application)
    if driver is None:
        return False
    with contextlib.suppress(psutil.NoSuchProcess):
        driver.send_signal(signal.SIGTERM)
    try:
        submit.wait(grace_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def kill(submit: subprocess.Popen[Any], application: str) -> None:
    """SIGKILL to the job's Python driver and to spark-submit."""
    found = python_driver(submit.pid, application)
    with contextlib.suppress(psutil.NoSuchProcess):
        if found is not None:
            found.kill()
    with contextlib.suppress(ProcessLookupError):
        submit.kill()


def run(command: list[str], env: dict[str, str], application: str) -> int:
    """spark-submit ``command`` as a child of this process until it ends; its exit status.
    spark-submit gets SIGKILL if this process ends. For a job that stops gracefully, a stop signal
    this process gets becomes SIGTERM to the job's Python driver, or, before the driver has started
    (nothing copied yet), SIGKILL to spark-submit. Another job's spark-submit ignores SIGINT, as
    before (Ctrl-C is its driver's), and gets SIGTERM itself."""
    graceful = stops_gracefully(application)
    parent = os.getpid()

    def before_exec() -> None:  # the CLI has started no thread: nothing another one holds is locked
        for signum in STOP_SIGNALS if graceful else (signal.SIGINT,):
            signal.signal(signum, signal.SIG_IGN)
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # this process ended before the prctl
            os._exit(1)

    process = subprocess.Popen(command, env=env, preexec_fn=before_exec)  # noqa: PLW1509
    asked: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        found = python_driver(process.pid, application)
        with contextlib.suppress(psutil.NoSuchProcess, ProcessLookupError):
            if graceful and found is not None:
                found.send_signal(signal.SIGTERM)
            elif graceful and not asked:  # not started yet (once asked, a driver gone is one stopping)
                process.kill()
            elif not graceful and signum == signal.SIGINT and found is not None:
                found.send_signal(signal.SIGINT)  # Ctrl-C is the driver's
            elif not graceful:
                process.send_signal(signal.SIGTERM)
        asked.append(signum)

    previous = {signum: signal.signal(signum, forward) for signum in STOP_SIGNALS}
    try:
        code = process.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's status


_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded here, not between fork and exec
