"""Offsets and topic ids of topics deleted under a running flow: a plan leaves them out rather than
failing (the planner lists the topics, then asks for their ends and ids: a topic deleted in between
answered UNKNOWN_TOPIC_OR_PART and stopped a continuous job), and every other error still fails."""

from __future__ import annotations

import functools
from collections.abc import Collection
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError

from srm.errors import SrmError
from srm.kafka.partitions import list_offsets
from srm.kafka.topics import existing_topics, topic_ids
from tests.unit.kafka_futures import done


class Admin:
    """An admin client of a pretend cluster: its topics (name -> end offset of every partition),
    the topics deleted, the topics this principal may not describe."""

    srm_principal = "User:srm (clusters.west)"
    srm_cluster = "west"
    srm_alias = "west"

    def __init__(self, ends: dict[str, int], denied: Collection[str] = (), failing: Collection[str] = ()) -> None:
        self.ends = ends
        self.denied = set(denied)
        self.failing = set(failing)  # topics whose leader answers with another error

    def _answer(self, topic: str, value: Any) -> Future[Any]:
        if topic in self.denied:
            return done(error=KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed"))
        if topic in self.failing:
            return done(error=KafkaError(KafkaError.INVALID_REQUEST, "Broker: Invalid request"))
        if topic not in self.ends:
            return done(error=KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "Broker: Unknown topic or partition"))
        return done(value)

    def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
        return {tp: self._answer(tp.topic, SimpleNamespace(offset=self.ends.get(tp.topic))) for tp in request}

    def describe_topics(self, topics: Any, **_: Any) -> dict[str, Future[Any]]:
        return {name: self._answer(name, SimpleNamespace(topic_id=f"id-{name}")) for name in topics.topic_names}

    def list_topics(self, timeout: float = 0) -> Any:
        return SimpleNamespace(topics={}, brokers={1: None})


def test_the_ends_of_a_deleted_topic_are_left_out_when_asked_and_fail_the_call_otherwise() -> None:
    admin = Admin({"orders": 40, "payments": 7})
    keys = [("orders", 0), ("orders", 1), ("gone", 0), ("payments", 0)]
    assert list_offsets(admin, keys, "latest", gone_ok=True) == {
        ("orders", 0): 40,
        ("orders", 1): 40,
        ("payments", 0): 7,
    }
    with pytest.raises(SrmError, match="cannot list offsets of gone, orders, payments on west: Broker: Unknown topic"):
        list_offsets(admin, keys, "latest")


def test_only_a_deleted_topic_is_left_out_any_other_error_still_fails_the_call() -> None:
    admin = Admin({"orders": 40, "broken": 1}, failing=["broken"])
    with pytest.raises(SrmError, match="Invalid request"):
        list_offsets(admin, [("orders", 0), ("broken", 0)], "latest", gone_ok=True)
    with pytest.raises(SrmError, match="Invalid request"):
        topic_ids(admin, ["orders", "broken"], gone_ok=True)


def test_topic_ids_leave_out_a_deleted_topic_when_asked() -> None:
    admin = Admin({"orders": 40})
    assert topic_ids(admin, ["orders", "gone"], gone_ok=True) == {"orders": "id-orders"}
    with pytest.raises(SrmError, match="Unknown topic"):
        topic_ids(admin, ["orders", "gone"])


def test_existing_topics_names_those_the_principal_sees_as_a_listing_of_all_would() -> None:
    admin = Admin({"srm-control.internal": 3, "hidden": 1}, denied=["hidden"])
    assert existing_topics(admin, ["srm-control.internal", "hidden", "absent"]) == {"srm-control.internal"}
    assert existing_topics(Admin({}), ["srm-control.internal"]) == set()


def test_an_error_about_thousands_of_topics_names_ten_and_counts_the_rest() -> None:
    admin = Admin({}, failing=[f"t{i:04d}" for i in range(2000)])
    with pytest.raises(SrmError) as raised:
        list_offsets(admin, [(f"t{i:04d}", 0) for i in range(2000)], "latest")
    message = str(raised.value)
    named = ", ".join(f"t{i:04d}" for i in range(10))
    assert message.startswith(f"cannot list offsets of {named} and 1990 more on west")
    assert len(message) < 300


def test_a_plan_leaves_out_the_partitions_the_source_no_longer_knows_and_keeps_the_rest() -> None:
    """The planner listed ``gone`` (2 partitions) and ``orders`` (3); then ``gone`` was deleted and
    partition 2 of ``orders`` is not served yet: the plan has ``orders`` 0 and 1 and their id."""
    from srm.replication.planner import Planner

    class Partial(Admin):
        def list_offsets(self, request: dict[Any, Any], **_: Any) -> dict[Any, Future[Any]]:
            answers = super().list_offsets(request)
            missing = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "Broker: Unknown topic or partition")
            return {tp: done(error=missing) if tp.partition == 2 else f for tp, f in answers.items()}

    planner = Planner.__new__(Planner)
    planner.source_admin, planner.source_alias = Partial({"orders": 40}), "west"
    planner.flow = SimpleNamespace(name="west->east")  # type: ignore[assignment]
    planner._refresh_clients = lambda: None  # type: ignore[method-assign]
    planner.topics = lambda: {"gone": 2, "orders": 3}  # type: ignore[method-assign]
    ends, ids = planner.snapshot()
    assert ends == {("orders", 0): 40, ("orders", 1): 40}
    assert ids == {"orders": "id-orders"}


def test_a_cluster_that_never_answers_is_unreachable_not_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    """A frozen target: the future's own wait ran out before librdkafka's (the job stopped on a
    bare TimeoutError while looking for the control topic)."""
    from srm.errors import ClusterUnreachableError
    from srm.kafka import retry, topics

    monkeypatch.setattr(topics, "ADMIN_TIMEOUT_S", 0.01)
    monkeypatch.setattr(topics, "retrying", functools.partial(retry.retrying, timeout_s=0.05))

    class Frozen(Admin):
        def describe_topics(self, topics: Any, **_: Any) -> dict[str, Future[Any]]:
            return {name: Future() for name in topics.topic_names}  # never resolved

    with pytest.raises(ClusterUnreachableError, match="cannot describe topics on west: no answer within 0 s") as raised:
        existing_topics(Frozen({}), ["srm-control.internal"])
    assert raised.value.cluster == "west"


def test_a_denied_describe_of_thousands_of_topics_names_ten_in_the_acl_it_needs() -> None:
    names = [f"t{i:04d}" for i in range(2000)]
    with pytest.raises(SrmError, match=r"needs DESCRIBE on TOPIC 't0000', .*'t0009' and 1990 more") as raised:
        topic_ids(Admin({n: 1 for n in names}, denied=names), names)
    assert len(str(raised.value)) < 500
