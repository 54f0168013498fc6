"""A flow's state from its facts (srm/health.py): paused, failed, running, stalled, with reason and since."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from srm.health import ALIVE_S, assess

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
