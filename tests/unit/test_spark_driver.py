"""The stop signals of a replication job go to its Python driver alone (srm.spark.driver), shown on
real processes standing in for spark-submit's JVM and the driver it starts (no Spark: what is
tested is who gets which signal and who waits for whom)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from srm.spark import driver

# spark-submit's JVM, as far as signals go: it starts the job's driver, reports whether it got the
# stop signals ignored, and ends with the driver's exit status (PythonRunner's exit).
SUBMIT = """
import signal, subprocess, sys, time
from pathlib import Path
out = Path(sys.argv[1])
ignored = [signal.getsignal(s) is signal.SIG_IGN for s in (signal.SIGINT, signal.SIGTERM)]
(out / "submit").write_text(str(ignored))
code = subprocess.call([sys.executable, str(out / sys.argv[2]), str(out)])
time.sleep(0.5)  # the JVM's own shutdown after its driver's
sys.exit(code)
"""
# The job's Python driver: on SIGTERM it "commits" for a while, then writes that it stopped.
DRIVER = """
import signal, sys, time
from pathlib import Path
out = Path(sys.argv[1])
def graceful(signum, frame):
    time.sleep(float((out / "commit_s").read_text()))
    (out / "stopped").write_text(f"signal {signum}")
    sys.exit(0)
if (out / "commit_s").exists():
    signal.signal(signal.SIGTERM, graceful)
    signal.signal(signal.SIGINT, graceful)
else:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a driver that does not stop
(out / "started").write_text("")
while True:
    time.sleep(0.05)
"""


def job(tmp_path: Path, commit_s: float | None = 0.5, script: str = "replicate.py") -> list[str]:
    (tmp_path / "submit.py").write_text(textwrap.dedent(SUBMIT))
    (tmp_path / script).write_text(textwrap.dedent(DRIVER))
    if commit_s is not None:
        (tmp_path / "commit_s").write_text(str(commit_s))
    return [sys.executable, str(tmp_path / "submit.py"), str(tmp_path), script]


def wait_for(path: Path, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} not written within {timeout_s:.0f} s"
        time.sleep(0.02)


STARTED: list[subprocess.Popen[bytes]] = []  # each in a session of its own, killed whole after its test


@pytest.fixture(autouse=True)
def reaped() -> Iterator[None]:
    """Every process group a test started is gone after it (drivers orphaned by a kill included)."""
    yield
    while STARTED:
        process = STARTED.pop()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(30)


def started(command: list[str], tmp_path: Path, **kwargs: Any) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(command, start_new_session=True, **kwargs)
    STARTED.append(process)
    wait_for(tmp_path / "started")
    return process


def start(tmp_path: Path, commit_s: float | None = 0.5) -> subprocess.Popen[bytes]:
    return started(driver.ignoring(job(tmp_path, commit_s)), tmp_path)


def test_only_the_replication_job_stops_gracefully() -> None:
    assert driver.stops_gracefully("/opt/srm/srm/jobs/replicate.py")
    assert not driver.stops_gracefully("/opt/srm/srm/jobs/checkpoints.py")


def test_a_sigterm_to_the_whole_group_reaches_the_driver_alone_and_spark_submit_ends_with_it(tmp_path: Path) -> None:
    submit = start(tmp_path)
    assert (tmp_path / "submit").read_text() == "[True, True]"  # SIGINT and SIGTERM ignored
    os.killpg(submit.pid, signal.SIGTERM)  # as Airflow's supervisor ends a task
    assert submit.wait(30) == 0
    assert (tmp_path / "stopped").read_text() == f"signal {signal.SIGTERM}"


def test_the_driver_is_found_under_spark_submit_by_its_script(tmp_path: Path) -> None:
    submit = start(tmp_path)
    found = driver.python_driver(submit.pid, "/anywhere/replicate.py")
    assert found is not None and found.ppid() == submit.pid
    assert driver.python_driver(submit.pid, "checkpoints.py") is None


def test_stop_waits_for_the_driver_to_commit_and_spark_submit_to_end(tmp_path: Path) -> None:
    submit = start(tmp_path, commit_s=1.0)
    began = time.monotonic()
    assert driver.stop(submit, "replicate.py", grace_s=20) is True
    assert time.monotonic() - began >= 1.0  # it waited for the commit
    assert submit.returncode == 0
    assert (tmp_path / "stopped").exists()


def test_stop_gives_up_after_the_grace_when_the_driver_does_not_end(tmp_path: Path) -> None:
    submit = start(tmp_path, commit_s=None)
    began = time.monotonic()
    assert driver.stop(submit, "replicate.py", grace_s=1.0) is False
    assert 1.0 <= time.monotonic() - began < 10
    assert submit.poll() is None  # left to the caller's kill


# srm-control run as far as signals go: driver.run of the stand-in job, its status as the exit status.
CONTROL = """
import sys
from srm.spark import driver
sys.exit(driver.run(sys.argv[2:], {}, sys.argv[1]))
"""


def control(tmp_path: Path, commit_s: float | None = 0.5, script: str = "replicate.py") -> subprocess.Popen[bytes]:
    (tmp_path / "control.py").write_text(textwrap.dedent(CONTROL))
    command = [sys.executable, str(tmp_path / "control.py"), script, *job(tmp_path, commit_s, script)]
    root = Path(driver.__file__).parents[2]
    return started(command, tmp_path, env={**os.environ, "PYTHONPATH": str(root)})


@pytest.mark.parametrize("to_group", [False, True])
def test_srm_control_run_turns_sigterm_into_the_drivers_graceful_stop(tmp_path: Path, to_group: bool) -> None:
    process = control(tmp_path)
    if to_group:  # systemd's default KillMode, Ctrl-C's SIGINT likewise
        os.killpg(process.pid, signal.SIGTERM)
    else:  # kill PID
        process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0
    assert (tmp_path / "stopped").read_text() == f"signal {signal.SIGTERM}"


def test_srm_control_run_asked_again_while_the_job_ends_still_ends_well(tmp_path: Path) -> None:
    process = control(tmp_path)
    driver_process = driver.python_driver(process.pid, "replicate.py")
    assert driver_process is not None
    process.send_signal(signal.SIGTERM)
    psutil.wait_procs([driver_process], timeout=30)  # stopped; its spark-submit still ending
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 0


def test_srm_control_run_passes_a_signal_to_the_spark_submit_of_a_job_without_a_graceful_stop(
    tmp_path: Path,
) -> None:
    process = control(tmp_path, script="checkpoints.py")
    assert (tmp_path / "submit").read_text() == "[True, False]"  # Ctrl-C is its driver's; SIGTERM its own
    process.send_signal(signal.SIGTERM)
    assert process.wait(30) == 128 + signal.SIGTERM  # spark-submit ended by it, as before
    assert not (tmp_path / "stopped").exists()


def test_srm_control_run_killed_takes_spark_submit_with_it(tmp_path: Path) -> None:
    process = control(tmp_path, commit_s=None)
    submit = psutil.Process(process.pid).children()[0]
    process.kill()  # kill -9: the job must not go on copying without the process that owns it
    process.wait(30)
    gone, alive = psutil.wait_procs([submit], timeout=30)
    assert gone and not alive  # (its driver, orphaned as with a JVM killed by -9, is reaped after the test)


@pytest.fixture
def operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str], Any]:
    """A replicate DAG's operator for the stand-in job ``script`` in tmp_path, on a local master."""
    from srm.airflow.spark import FlowSparkSubmitOperator

    monkeypatch.setenv("AIRFLOW_CONN_SPARK_DEFAULT", json.dumps({"conn_type": "spark", "host": "local[*, 4]"}))

    def made(script: str) -> FlowSparkSubmitOperator:
        return FlowSparkSubmitOperator(
            source="a", target="b", config_file="srm.yaml", task_id="t", application=str(tmp_path / script)
        )

    return made


def test_a_killed_airflow_task_stops_its_replication_job_gracefully(
    tmp_path: Path, operator: Callable[[str], Any]
) -> None:
    task = operator("replicate.py")
    hook = task._get_hook()
    command = hook._build_spark_submit_command(str(tmp_path / "replicate.py"))
    assert command[:3] == list(driver.IGNORING) and Path(command[3]).name == "spark-submit"
    assert Path(operator("checkpoints.py")._get_hook()._build_spark_submit_command("checkpoints.py")[0]).name == (
        "spark-submit"
    )
    task._hook, hook._submit_sp = hook, start(tmp_path, commit_s=1.0)
    task.on_kill()  # as Airflow calls it on SIGTERM or a timeout
    assert hook._submit_sp.returncode == 0
    assert (tmp_path / "stopped").exists()  # committed, not killed
    assert task.killed  # execute fails the task when spark-submit returns


def test_a_killed_airflow_task_kills_a_job_that_does_not_stop_driver_included(
    tmp_path: Path, operator: Callable[[str], Any]
) -> None:
    from srm.airflow.spark import STOP_GRACE_S

    task = operator("replicate.py")
    task._hook = hook = task._get_hook()
    hook._submit_sp = submit = start(tmp_path, commit_s=None)  # a driver that ignores SIGTERM
    found = driver.python_driver(submit.pid, "replicate.py")
    assert found is not None
    began = time.monotonic()
    task.on_kill()
    assert STOP_GRACE_S <= time.monotonic() - began < STOP_GRACE_S + 10
    assert submit.wait(10) == -signal.SIGKILL
    gone, alive = psutil.wait_procs([found], timeout=10)
    assert gone and not alive  # not left running without its JVM


class Run:
    """What the replication job's signal handler drives: a run to stop."""

    def __init__(self) -> None:
        self.stops = 0
        self.stopped = threading.Event()

    def stop(self) -> None:
        self.stops += 1
        self.stopped.set()


@pytest.fixture
def handlers() -> Iterator[None]:
    """The test's own SIGINT/SIGTERM handlers back afterwards (the job's replace them)."""
    saved = {signum: signal.getsignal(signum) for signum in driver.STOP_SIGNALS}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


def stop_threads_ended() -> None:
    for thread in threading.enumerate():  # every stop started has ended
        if thread.name == "srm-stop":
            thread.join(10)


def test_a_signal_while_the_run_starts_stops_it_once_it_has_started(handlers: None) -> None:
    from srm.jobs.replicate import StopOnSignals

    stop, run = StopOnSignals(), Run()  # installed first thing, before the session and the claim
    assert signal.getsignal(signal.SIGTERM) == stop.graceful
    stop.graceful(signal.SIGTERM, None)
    signal.signal(signal.SIGINT, lambda signum, frame: None)  # what pyspark's SparkContext installs
    assert stop.started(run) is run  # type: ignore[arg-type]
    stop_threads_ended()
    assert run.stopped.is_set() and run.stops == 1
    assert signal.getsignal(signal.SIGTERM) == stop.graceful
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # a second Ctrl-C: at once


def test_the_job_stops_its_run_once_however_often_it_is_asked(handlers: None) -> None:
    from srm.jobs.replicate import StopOnSignals

    stop, run = StopOnSignals(), Run()
    signal.signal(signal.SIGINT, lambda signum, frame: None)  # what pyspark's SparkContext installs
    stop.started(run)  # type: ignore[arg-type]
    assert signal.getsignal(signal.SIGINT) == stop.graceful  # Ctrl-C is the job's again, not Spark's
    stop.graceful(signal.SIGTERM, None)  # to the process group
    stop.graceful(signal.SIGTERM, None)  # and from Airflow's on_kill
    stop_threads_ended()
    assert run.stopped.is_set() and run.stops == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # a second Ctrl-C: at once
