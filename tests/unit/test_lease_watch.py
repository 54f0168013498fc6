"""The driver's watch over a running lease says when looking for a change of plan takes long
enough to delay one (srm.replication.lease)."""

from __future__ import annotations

from srm.replication.lease import SLOW_WATCH_S, slow_watch


def test_a_look_for_changes_that_takes_long_names_its_slow_step() -> None:
    line = slow_watch("flow w->e: lease 4", "looking for a change", {"ownership": 0.1, "plan": 9.9})
    assert line == (
        "flow w->e: lease 4: looking for a change took 10.0 s (ownership 0.1 s, plan 9.9 s): "
        "a change of plan applies that much later"
    )


def test_a_look_within_the_bound_says_nothing() -> None:
    assert slow_watch("flow w->e: lease 4", "ending the lease", {"record": SLOW_WATCH_S - 0.01}) is None
    assert slow_watch("flow w->e: lease 4", "ending the lease", {"record": SLOW_WATCH_S}) is not None
