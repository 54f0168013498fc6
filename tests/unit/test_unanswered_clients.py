"""A driver's long-lived admin client that got no answer is not asked again: the next look or
plan builds a new one (after a freeze, an old client at times went on getting no answer while
the cluster answered new ones), and only that cluster's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from srm.errors import ClusterUnreachableError
from srm.kafka import control_lists
from srm.kafka.control_lists import ControlReader
from srm.replication.planner import Planner


class Built:
    """admin_client() stand-in: each call a new, numbered client of the cluster asked for."""

    def __init__(self) -> None:
        self.made: list[tuple[str, int]] = []

    def __call__(self, cluster: Any, **_: Any) -> tuple[str, int]:
        client = (cluster.alias, len(self.made))
        self.made.append(client)
        return client


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> Built:
    made = Built()
    monkeypatch.setattr("srm.kafka.clients.admin_client", made)
    monkeypatch.setattr("srm.kafka.clients.settled", lambda client: client)
    return made


def test_a_control_reader_whose_look_got_no_answer_looks_next_time_with_a_new_client(
    built: Built, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[Any] = []
    unanswered = ClusterUnreachableError("cannot describe topics on east: no answer within 30 s", cluster="east")
    answers: list[Any] = [unanswered, set()]

    def existing(admin: Any, topics: list[str]) -> set[str]:
        asked.append(admin)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(control_lists, "existing_topics", existing)
    reader = ControlReader(SimpleNamespace(alias="east"))  # type: ignore[arg-type]
    with pytest.raises(ClusterUnreachableError, match="no answer"):
        reader.poll()
    assert reader.poll(recheck=True) is False  # the topic does not exist yet
    assert asked == [("east", 0), ("east", 1)]


def planner(changed: list[str]) -> Planner:
    """A west->east planner with its first clients, whose settings watch reports ``changed``."""
    made = Planner.__new__(Planner)
    made.source_alias, made.target_alias, made.mode = "west", "east", "continuous"
    made.config = SimpleNamespace(cluster=lambda alias: SimpleNamespace(alias=alias))  # type: ignore[assignment]
    made.settings_watch = SimpleNamespace(changed=lambda *clusters: changed, accept=lambda: None)  # type: ignore[assignment]
    made.source_admin, made.target_admin = "west client", "east client"
    made.control = None
    made._unanswered = set()
    made._early = None
    return made


def test_a_planner_builds_again_only_the_client_of_the_cluster_that_did_not_answer(built: Built) -> None:
    made = planner([])

    def snapshot() -> Any:
        made._refresh_clients()
        raise ClusterUnreachableError("cannot describe topics on east: no answer within 30 s", cluster="east")

    made.snapshot = snapshot  # type: ignore[method-assign]
    start: Any = {"positions": {}}
    assert made.latest(start) is start  # no new lease while east does not answer
    assert (made.source_admin, made.target_admin) == ("west client", "east client")
    assert made.unanswered_cluster == "east"
    made._refresh_clients()  # the next plan
    assert (made.source_admin, made.target_admin) == ("west client", ("east", 0))
    made._refresh_clients()  # and the one after, once east answered: the new client stays
    assert built.made == [("east", 0)]


def test_a_planner_builds_again_only_the_client_of_the_cluster_whose_settings_changed(built: Built) -> None:
    made = planner(["west"])
    made._refresh_clients()
    assert (made.source_admin, made.target_admin) == (("west", 0), "east client")
