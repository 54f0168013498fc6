"""An internal topic another client created an instant ago is checked once the brokers answer for
it, instead of failing the flow's start (several flows into one target start at the same moment)."""

from __future__ import annotations

from typing import Any

import pytest

from srm.errors import SrmError, TopicConflictError
from srm.kafka import internal_topics
from srm.kafka.internal_topics import InternalTopic, check_internal_topic

OWNERS = InternalTopic("srm-owners.internal", "east", "compact", 1, 1)


def cluster(monkeypatch: pytest.MonkeyPatch, answers: list[Any], policy: str = "compact") -> list[str]:
    """The admin calls answered from ``answers`` in turn: None (not in the metadata yet), an
    exception (describing the configs fails), then the topic as it is."""
    calls: list[str] = []

    def counts(admin: Any, include_internal: bool = False) -> dict[str, int]:
        calls.append("metadata")
        answer = answers.pop(0) if answers else "ok"
        return {} if answer is None else {OWNERS.name: 1}

    def configs(admin: Any, name: str) -> dict[str, str]:
        calls.append("configs")
        if answers and isinstance(answers[0], Exception):
            raise answers.pop(0)
        return {"cleanup.policy": policy}

    monkeypatch.setattr(internal_topics, "partition_counts", counts)
    monkeypatch.setattr(internal_topics, "describe_topic_configs", configs)
    monkeypatch.setattr(internal_topics, "topic_replication_factors", lambda admin, names: dict.fromkeys(names, 1))
    monkeypatch.setattr(internal_topics, "VISIBLE_POLL_S", 0.0)
    return calls


def test_a_topic_the_brokers_do_not_answer_for_yet_is_checked_once_they_do(monkeypatch: pytest.MonkeyPatch) -> None:
    unknown = SrmError("cannot read the configs of topic 'srm-owners.internal' on b: Unknown topic or partition")
    calls = cluster(monkeypatch, [None, "ok", unknown])
    check_internal_topic(object(), OWNERS, 1)
    assert calls == ["metadata", "metadata", "configs", "metadata", "configs"]


def test_other_failures_and_conflicts_are_not_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    denied = SrmError("cannot read the configs of topic 'srm-owners.internal' on b: TOPIC_AUTHORIZATION_FAILED")
    calls = cluster(monkeypatch, ["ok", denied])
    with pytest.raises(SrmError, match="AUTHORIZATION_FAILED"):
        check_internal_topic(object(), OWNERS, 1)
    assert calls == ["metadata", "configs"]
    cluster(monkeypatch, [], policy="delete")
    with pytest.raises(TopicConflictError, match=r"cleanup\.policy is delete, expected compact"):
        check_internal_topic(object(), OWNERS, 1)


def test_a_topic_that_never_shows_is_named_after_the_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster(monkeypatch, [None] * 10_000)
    monkeypatch.setattr(internal_topics, "VISIBLE_WAIT_S", 0.2)
    with pytest.raises(SrmError, match=r"topic 'srm-owners.internal' exists .* has not shown it within 0 s"):
        check_internal_topic(object(), OWNERS, 1)
