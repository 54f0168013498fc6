"""A flow's state from its facts (srm/operations/health.py): paused, failed, running, stalled, with reason and since."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from srm.operations.health import ALIVE_S, assess

NOW = 1_800_000_000_000
DAG = "us-west_to_us-east.replicate"


def failure(at_ms: int, dag_id: str = DAG) -> dict[str, Any]:
    at = datetime.fromtimestamp(at_ms / 1000, UTC)
    return {"failed_at": at, "dag_id": dag_id, "task_id": "replicate", "error": "SrmError: topic t gone\nmore"}


def test_a_fresh_heartbeat_is_running_and_an_old_one_stalled_since_it() -> None:
    assert assess(NOW, NOW - 5_000, False, None, DAG) == ("running", "replicated heartbeat 5 s old", None)
    state, reason, since = assess(NOW, NOW - int(ALIVE_S * 1000) - 60_000, None, None, DAG)
    assert (state, reason) == ("stalled", "no replicated heartbeat for 180 s (limit 120 s)")
    assert since == datetime.fromtimestamp((NOW - 180_000) / 1000, UTC).isoformat(timespec="seconds")
    assert assess(NOW, None, None, None, DAG)[:2] == ("stalled", "no heartbeat has been replicated yet")


def test_a_replicate_failure_after_the_newest_heartbeat_is_failed() -> None:
    state, reason, since = assess(NOW, NOW - 60_000, False, failure(NOW - 30_000), DAG)
    assert (state, reason) == ("failed", "task replicate failed: SrmError: topic t gone")
    assert since is not None and since.endswith("+00:00")
    # The flow recovered (a heartbeat replicated after it), or another DAG failed: not failed.
    assert assess(NOW, NOW - 1_000, False, failure(NOW - 30_000), DAG)[0] == "running"
    assert assess(NOW, NOW - 60_000, False, failure(NOW - 1_000, "x.heartbeats"), DAG)[0] == "running"


def test_paused_wins() -> None:
    assert assess(NOW, None, True, failure(NOW), DAG) == ("paused", f"DAG {DAG} is paused in Airflow", None)


def waiting(at_ms: int, state: str = "waiting") -> dict[str, Any]:
    since = datetime.fromtimestamp(at_ms / 1000, UTC)
    reason = "cannot list topics on us-east (127.0.0.1:9093): timed out; the next lease waits for it"
    return {"state": state, "cluster": "us-east", "reason": reason, "since": since}


def test_a_flow_that_said_it_waits_for_a_cluster_is_waiting_since_then_until_a_heartbeat_crosses() -> None:
    state, reason, since = assess(NOW, NOW - 300_000, False, None, DAG, waiting=waiting(NOW - 240_000))
    at = datetime.fromtimestamp((NOW - 240_000) / 1000, UTC).isoformat(timespec="seconds")
    assert (state, since) == ("waiting", at)
    assert reason.startswith(f"waiting for us-east since {at}: cannot list topics on us-east")
    assert assess(NOW, None, False, None, DAG, waiting=waiting(NOW))[0] == "waiting", "the target cannot be read"
    # a heartbeat replicated after it began to wait: copying again (the run's next row may be late)
    assert assess(NOW, NOW - 1_000, False, None, DAG, waiting=waiting(NOW - 60_000))[0] == "running"
    assert assess(NOW, NOW - 1_000, False, None, DAG, waiting=waiting(NOW - 60_000, "copying"))[0] == "running"
    # a failure after it: failed, with the failure's message
    assert assess(NOW, None, False, failure(NOW), DAG, waiting=waiting(NOW - 60_000))[0] == "failed"


def test_a_run_that_failed_is_failed_with_its_message_until_a_heartbeat_crosses() -> None:
    row = waiting(NOW - 60_000, "failed") | {"reason": "flow a->b: failing since T: timed out\nmore"}
    state, reason, _ = assess(NOW, NOW - 120_000, False, None, DAG, waiting=row)
    assert (state, reason) == ("failed", "the run failed: flow a->b: failing since T: timed out")
    assert assess(NOW, NOW - 1_000, False, None, DAG, waiting=row)[0] == "running"
