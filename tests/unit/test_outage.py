"""A fault that does not go away ends in errors.retry.timeout with what, where and since when;
one that passes leaves no trace; -1 waits and says so every minute (srm.replication.outage)."""

from __future__ import annotations

import logging

import pytest

from srm.errors import LastingFaultError
from srm.replication.job import fault_payload, split_faults
from srm.replication.outage import Outage


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def where() -> str:
    return "flow a->b: slot 0 writing to b (localhost:9093), copying t[0] at offset 42 from a"


def test_a_fault_that_lasts_past_the_bound_fails_with_where_the_cause_since_when_and_the_remedy() -> None:
    clock = Clock()
    outage = Outage(clock, wall=lambda: 1_764_378_000.0)  # 2025-11-29 01:00:00 UTC
    for _ in range(5):
        outage.failed("Local: Message timed out", 300_000, where)
        clock.now += 60
    with pytest.raises(LastingFaultError) as failed:
        outage.failed("Local: Message timed out", 300_000, where)
    message = str(failed.value)
    assert message.startswith(where())
    assert "failing since 2025-11-29 01:00:00 UTC (300 s, 6 attempt(s)): Local: Message timed out" in message
    assert "errors.retry.timeout (300000 ms)" in message and "resumes from its committed progress" in message


def test_a_commit_between_failures_starts_the_clock_again() -> None:
    clock = Clock()
    outage = Outage(clock)
    outage.failed("NOT_ENOUGH_REPLICAS", 300_000, where)
    clock.now += 299
    outage.recovered()
    assert not outage.ongoing and outage.remaining(300_000) == 300.0
    outage.failed("NOT_ENOUGH_REPLICAS", 300_000, where)
    clock.now += 299
    outage.failed("NOT_ENOUGH_REPLICAS", 300_000, where)  # 299 s of this outage, not 598
    assert outage.failures == 2


def test_zero_fails_at_the_first_failure() -> None:
    with pytest.raises(LastingFaultError):
        Outage(Clock()).failed("_TRANSPORT", 0, where)


def test_minus_one_waits_for_good_and_says_what_for_once_a_minute(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    outage = Outage(clock)
    with caplog.at_level(logging.WARNING, logger="srm.replication.outage"):
        for _ in range(600):  # 10 minutes of a failure a second
            outage.failed("_TRANSPORT", -1, where)
            clock.now += 1
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 9, lines  # minutes 1..9 (the first failure is the caller's to log)
    assert all(line.startswith(where() + ": waiting since ") for line in lines)
    assert all("for good (errors.retry.timeout: -1): _TRANSPORT" in line for line in lines)
    assert outage.remaining(-1) is None


def test_a_task_hands_its_lasting_fault_to_the_driver_beside_its_partitions_results() -> None:
    payloads = [{"row": {"topic": "t"}, "runs": [], "losses": []}, fault_payload("flow a->b: failing since ...")]
    rest, fault = split_faults(payloads)
    assert rest == payloads[:1] and fault == "flow a->b: failing since ..."
    assert split_faults(payloads[:1]) == (payloads[:1], None)


def test_a_record_that_timed_out_began_the_fault_its_delivery_time_out_ago_and_a_raise_starts_afresh() -> None:
    clock = Clock()
    outage = Outage(clock, wall=lambda: 1_764_378_000.0)
    outage.began("Local: Message timed out", waited_s=20.0)  # seen now, waiting since 20 s ago
    assert outage.elapsed() == 20.0 and outage.since().endswith("00:59:40 UTC")
    with pytest.raises(LastingFaultError, match=r"\(20 s, 1 attempt\(s\)\)"):
        outage.failed("Local: Message timed out", 20_000, where)
    assert not outage.ongoing, "whatever comes next (a new run in this worker) has its own bound"
