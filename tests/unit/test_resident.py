"""Long-lived workers: the hand-over notices a copier that dies, a replaced copier's objects are
collected, and a run is released once whichever threads release it."""

from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Any

import pytest

from srm.replication import resident
from srm.replication.job import Lease
from srm.replication.launch import ReplicationRun
from srm.replication.resident import Cadence, ResidentCopier, freeze_heap
from tests.unit.test_ownership import flow


class DyingCopier(ResidentCopier):
    """A copier thread that ends (as after an error) when told to, without copying anything."""

    def __init__(self) -> None:
        job: Any = type("Job", (), {"transactional_id": "t-0", "lease": None})()
        super().__init__(job)
        self.die = threading.Event()

    def run(self) -> None:
        self.die.wait(10)
        self._close()


class DiesWhenCleared(threading.Event):
    """The hand-over's event whose clear() lets the copier end first: the copier's last act (setting
    the event) comes between the hand-over's look at the copier and its wait."""

    def __init__(self, copier: DyingCopier) -> None:
        super().__init__()
        self.copier = copier

    def clear(self) -> None:
        self.copier.die.set()
        self.copier.join(5)
        super().clear()


def test_the_hand_over_notices_a_copier_that_ends_while_it_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resident, "TAKE_TIMEOUT_S", 3.0)
    copier = DyingCopier()
    copier._taken = DiesWhenCleared(copier)
    copier.start()
    started = time.monotonic()
    assert copier.take() == []  # the copier's final results: it copied nothing
    assert time.monotonic() - started < 1.0, "the hand-over waited for a copier that was gone"


def test_a_replaced_copiers_objects_are_collected_at_the_next_copiers_start() -> None:
    class Copier:
        pass

    old = Copier()
    old.self = old  # type: ignore[attr-defined]  # a cycle, as clients and callbacks make
    ref = weakref.ref(old)
    try:
        freeze_heap()  # the old copier starts: it is alive and frozen with the rest
        del old  # replaced: nothing refers to it any more
        freeze_heap()  # the next copier starts
        assert ref() is None, "the replaced copier stayed frozen for the life of the worker"
    finally:
        gc.unfreeze()


def test_a_run_is_released_once_when_two_threads_release_it() -> None:
    calls: list[str] = []
    gate = threading.Barrier(8)

    class Part:
        def __init__(self, name: str) -> None:
            self.name = name
            self.flow = flow()

        def close(self) -> None:
            calls.append(f"{self.name}.close")
            time.sleep(0.05)

        def stop(self) -> None:
            calls.append(f"{self.name}.stop")

    run = ReplicationRun(loop=None, runner=Part("runner"), owner=Part("owner"))

    def release() -> None:
        gate.wait()
        run._release()

    threads = [threading.Thread(target=release) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert calls == ["runner.close", "owner.stop", "owner.close"]


def test_a_copier_starts_again_when_a_clusters_client_settings_resolve_differently(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rotated password (in the YAML, a ${file:} or ${env:} secret, an Airflow connection): the
    next lease's task does not renew the running copier, whose clients hold the old settings."""
    started: list[Any] = []

    class Copier(threading.Thread):
        def __init__(self, job: Any, digests: tuple[str, str]) -> None:
            super().__init__(daemon=True)
            self.job, self.digests, self.error, self.deadline = job, digests, None, 1e18
            self.renewed: list[Any] = []
            self.final: list[Any] = [f"results of copier {len(started)}"]  # copied since its last take
            self.stop = threading.Event()
            started.append(self)

        def run(self) -> None:
            while self.deadline > 0:
                time.sleep(0.01)

        def renew(self, job: Any) -> None:
            self.renewed.append(job)

        def hand_final(self) -> list[Any]:
            final, self.final = self.final, []
            return final

    password = {"b": "before"}
    monkeypatch.setattr(resident, "ResidentCopier", Copier)
    monkeypatch.setattr(resident, "freeze_heap", lambda: None)
    monkeypatch.setattr(resident.clients, "settings_digest", lambda cluster: password.get(cluster.alias, "same"))
    monkeypatch.setattr(resident, "_COPIERS", {})
    source, target = type("C", (), {"alias": "a"})(), type("C", (), {"alias": "b"})()
    settings = type("S", (), {"exactly_once": True, "on_data_loss": "fail"})()
    flow = type("F", (), {"name": "a->b", "settings": settings})()
    job = type("Job", (), {"flow": flow, "slot": 0, "epoch": 1, "linger_ms": 0})()
    job.source, job.target, job.ranges, job.owners_run = source, target, (), "run-1"
    first = resident.attach(job)
    assert resident.attach(job) is first and first.renewed == [job], "the same settings: renewed"
    password["b"] = "after"
    second = resident.attach(job)
    assert second is not first and not first.is_alive(), "the old copier committed and stopped"
    assert second.digests == ("same", "after")
    assert second.carried == ["results of copier 0"], "what the old one copied reaches the next take"
    second.deadline = 0.0
    second.join(5)  # it stopped by itself, as a copier does when this run's next epoch begins

    def job_of(epoch: int, run: str) -> Any:
        other = type("Job", (), {"flow": job.flow, "slot": 0, "epoch": epoch, "linger_ms": 0})()
        other.source, other.target, other.ranges, other.owners_run = source, target, (), run
        return other

    third = resident.attach(job_of(2, "run-1"))
    assert third.carried == ["results of copier 1"], "what a copier that stopped by itself copied is reported"
    assert second.final == [], "once"
    third.deadline = 0.0
    third.join(5)
    fourth = resident.attach(job_of(3, "run-2"))
    assert fourth.carried == [], "another run's copier's results are not this run's to report"
    fourth.deadline = 0.0


def test_a_copier_that_caught_up_commits_at_once_without_a_linger() -> None:
    cadence = Cadence.of(Lease(1, 30, 100))
    cadence.began = 10.0
    assert cadence.due(0.09, caught_up=True, now=10.001)
    assert not cadence.due(0.09, caught_up=False, now=10.001), "records still coming, the interval not over"
    assert not cadence.due(None, caught_up=True, now=10.001), "no transaction open: nothing to commit"
    assert cadence.due(0.0, caught_up=False, now=10.001), "the interval is over"


def test_a_linger_spaces_the_commits_of_a_copier_that_caught_up() -> None:
    cadence = Cadence.of(Lease(1, 30, 100, 40))
    assert (cadence.interval_s, cadence.linger_s) == (0.1, 0.04)
    assert cadence.due(0.09, caught_up=True, now=5.0), "the first commit does not wait"
    cadence.began = 10.0
    assert cadence.lingering_s(10.01) == pytest.approx(0.03)
    assert not cadence.due(0.09, caught_up=True, now=10.01)
    assert cadence.due(0.05, caught_up=True, now=10.04)
    assert cadence.due(0.0, caught_up=False, now=10.01), "a transaction due (interval, full chunk) commits at once"
    renewed = cadence.renewed(Lease(2, 30, 200, 0))
    assert (renewed.interval_s, renewed.linger_s, renewed.began) == (0.2, 0.0, 10.0)


def test_a_copier_starts_again_when_its_transactions_linger_changes() -> None:
    """transaction.linger.ms edited: its clients batch for the linger they were built with
    (producer_settings, consumer_settings), so the next lease's task starts a new copier."""
    from dataclasses import replace

    from tests.unit.test_writer import job

    running = job(continuous=True)
    assert running.linger_ms == 0
    assert resident._same_writer(running, replace(running, ranges=()))
    lingering = replace(running, lease=replace(running.lease, transaction_linger_ms=100))
    assert lingering.linger_ms == 100
    assert not resident._same_writer(running, lingering)
    assert resident._same_writer(lingering, replace(lingering, ranges=()))
    assert job(continuous=False).linger_ms == 0
