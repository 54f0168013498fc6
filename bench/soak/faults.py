"""The soak's faults: what each kind does to the running flow, and when.

Every kind acts on what a production flow meets: a process killed, a broker restarted or frozen
(SIGSTOP: a partitioned data centre looks like that), the source growing (partitions, a topic), an
operator changing what is replicated (``srm-control topics``) or how (``tasks.max`` in the YAML).
A fault ends when the thing it did is over (a restarted broker answers, a frozen one runs again);
its recovery is measured from then by the checker: the first record created after the end that
arrives on the target.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import yaml

FREEZE_S = 60.0
TASKS_HELD_S = 180.0  # a tasks.max fault's scale-out lasts this long (several leases)
KINDS = (
    "kill_worker",
    "add_topic",
    "restart_target",
    "edit_list",
    "kill_driver",
    "add_partitions",
    "freeze_target",
    "tasks_max",
    "restart_source",
)


@dataclass
class Fault:
    kind: str
    at_s: float  # seconds into the run when it began
    duration_s: float = 0.0
    recovered_s: float | None = None  # from its end until a record created after the end arrived
    detail: str = ""


def schedule(minutes: float, count: int, kinds: tuple[str, ...], warmup_s: float) -> list[tuple[float, str]]:
    """(second of the run, kind) of ``count`` faults evenly spread after the warm-up and before the
    last two minutes (kept quiet for the final checks), cycling through ``kinds``."""
    span = minutes * 60 - warmup_s - 120
    if count and span <= 0:
        raise SystemExit(f"--minutes {minutes} leaves no time for faults after a {warmup_s:.0f} s warm-up")
    step = span / max(count, 1)
    return [(warmup_s + i * step, kinds[i % len(kinds)]) for i in range(count)]


class Faults:
    """Applies faults to the soak (``soak``: bench.soak.runner.Soak)."""

    def __init__(self, soak: Any) -> None:
        self.soak = soak
        self.topics_added = 0
        self.denied = False

    def apply(self, kind: str) -> str:
        action: Callable[[], str] = getattr(self, kind)
        return action()

    # --- processes ----------------------------------------------------------------------------
    def kill_driver(self) -> str:
        """SIGKILL of the Spark driver JVM (srm-control run ends with it; the supervisor starts the job again)."""
        run, pid = self.soak.job.pid(), self.soak.job.spark_submit()
        if run is None or pid is None:
            return "no driver running"
        os.kill(pid, signal.SIGKILL)
        self.soak.job.wait_restarted(run)
        return f"driver pid {pid} killed; job restarted"

    def kill_worker(self) -> str:
        """SIGKILL of a Python worker of the job (a copier runs in one)."""
        workers = self.soak.job.python_workers()
        if not workers:
            return "no Python worker running"
        victim = max(workers, key=lambda p: p.cpu_times().user)  # the busiest: a copier's
        victim.kill()
        return f"Python worker pid {victim.pid} killed"

    def restart_source(self) -> str:
        return self._restart(self.soak.brokers[0])

    def restart_target(self) -> str:
        return self._restart(self.soak.brokers[1])

    def _restart(self, broker: Any) -> str:
        """SIGKILL of the broker, then started again on the same log (a crash and a restart)."""
        pid = broker.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)  # the soak started it: its child, to be reaped
        broker.pidfile.unlink(missing_ok=True)
        broker.start()
        broker.wait_until_answering(time.monotonic() + 120)
        return f"{broker.alias}: pid {pid} killed, restarted as pid {broker.pid()}"

    def freeze_target(self) -> str:
        broker = self.soak.brokers[1]
        pid = broker.pid()
        os.kill(pid, signal.SIGSTOP)
        try:
            self.soak.stopping.wait(FREEZE_S)
        finally:
            os.kill(pid, signal.SIGCONT)
        return f"{broker.alias} (pid {pid}) frozen for {FREEZE_S:.0f} s"

    # --- the source grows ---------------------------------------------------------------------
    def add_partitions(self) -> str:
        from srm.kafka.topics import create_partitions

        topic = sorted(self.soak.topics)[0]
        total = self.soak.topics[topic] + 2
        create_partitions(self.soak.source_admin, topic, total)
        self.soak.topics[topic] = total
        return f"{topic}: {total} partitions"

    def add_topic(self) -> str:
        self.topics_added += 1
        topic = f"soak-added-{self.topics_added}"
        self.soak.create_topic(topic, 2)
        return f"{topic} created (2 partitions)"

    # --- operators ----------------------------------------------------------------------------
    def edit_list(self) -> str:
        """A denylist entry added with srm-control, then taken off again the next time."""
        option = "--remove-blacklist" if self.denied else "--add-blacklist"
        self.denied = not self.denied
        command = [*self.soak.srm_control(), "topics", *self.soak.flow_args(), option, "soak-never-.*"]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode:
            raise RuntimeError(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
        return f"srm-control topics {option} soak-never-.*"

    def tasks_max(self) -> str:
        """tasks.max raised by one in the flow's YAML (the running job reloads it), and put back
        TASKS_HELD_S later: the flow scales out and in again. The run's steady state stays the
        same (a lasting change would make a new one: each slot's transactions touch its partitions,
        so the history's runs per partition and hour follow the number of slots)."""
        usual = self.soak.options.tasks
        self._set_tasks(usual + 1)
        try:
            self.soak.stopping.wait(TASKS_HELD_S)
        finally:
            self._set_tasks(usual)
        return f"tasks.max {usual + 1} for {TASKS_HELD_S:.0f} s, then {usual} again"

    def _set_tasks(self, tasks: int) -> None:
        data = yaml.safe_load(self.soak.config_path.read_text())
        data["flows"][0]["tasks.max"] = tasks
        self.soak.config_path.write_text(yaml.safe_dump(data, sort_keys=False))
