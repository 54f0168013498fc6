"""A lease's payloads as its accounting writes them: each partition's end on the source, and the
idle, caught-up partitions left out (srm.replication.accounting.moved_or_behind)."""

from __future__ import annotations

from typing import Any

from srm.replication.accounting import moved_or_behind
from srm.replication.job import OPEN_END


def payload(topic: str, partition: int, next_offset: int, records: int = 0, losses: int = 0) -> dict[str, Any]:
    row = {"topic": topic, "partition": partition, "next_offset": next_offset, "records": records}
    return {"row": {**row, "planned_end": OPEN_END}, "losses": [{"first": 0}] * losses}


def test_a_lease_keeps_what_moved_lost_or_lags_with_the_source_end_as_its_planned_end() -> None:
    payloads = [
        payload("idle", 0, 10),  # caught up, nothing copied: left out
        payload("moved", 0, 20, records=5),  # copied and caught up
        payload("behind", 0, 30),  # nothing copied, but the source is ahead
        payload("lost", 0, 40, losses=1),
        payload("deleted", 0, 50),  # not answered for: where the copy stands, no lag
    ]
    ends = {("idle", 0): 10, ("moved", 0): 20, ("behind", 0): 35, ("lost", 0): 40}
    kept = moved_or_behind(payloads, ends)
    assert [(p["row"]["topic"], p["row"]["planned_end"]) for p in kept] == [("moved", 20), ("behind", 35), ("lost", 40)]


def test_without_the_source_ends_a_lease_keeps_only_what_moved_or_lost() -> None:
    payloads = [payload("idle", 0, 10), payload("moved", 0, 20, records=1), payload("lost", 0, 5, losses=1)]
    kept = moved_or_behind(payloads, {})
    assert [(p["row"]["topic"], p["row"]["planned_end"]) for p in kept] == [("moved", 20), ("lost", 5)]
