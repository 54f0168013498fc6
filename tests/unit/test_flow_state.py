"""A running flow records when it starts and stops waiting for a cluster, once per change, where
the status reads it (srm.replication.flow_state, the warehouse's flow_states table)."""

from __future__ import annotations

from pathlib import Path

from srm.operations.health import assess
from srm.replication.flow_state import FlowStates
from srm.storage.warehouse import FLOW_STATES, Warehouse


def test_waiting_is_recorded_once_per_change_and_read_back_as_the_flows_state(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "wh")
    states = FlowStates(warehouse, "a->b", "run-1")
    states.copying()  # copying from the start: nothing to record
    assert warehouse.read(FLOW_STATES, flow="a->b") == []
    for _ in range(3):  # a wait of three attempts: one row
        states.waiting("b", "cannot list topics on b (127.0.0.1:2): timed out")
    rows = warehouse.read(FLOW_STATES, flow="a->b")
    assert [(r["state"], r["cluster"], r["run_id"]) for r in rows] == [("waiting", "b", "run-1")]
    state, reason, _ = assess(2**42, None, False, None, "dag", waiting=rows[0])
    assert state == "waiting" and reason.startswith("waiting for b since ")
    states.copying()
    states.copying()
    rows = sorted(warehouse.read(FLOW_STATES, flow="a->b"), key=lambda r: r["since"])
    assert [r["state"] for r in rows] == ["waiting", "copying"]
