"""Kafka calls that fail: retriable errors are retried with backoff, others (a missing ACL among them) fail at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException
from pydantic import SecretStr

from srm.config.model import Cluster
from srm.errors import ClusterUnreachableError, SrmError
from srm.kafka.retry import needs, retrying


def failing(errors: list[int], result: str = "ok") -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise KafkaException(KafkaError(errors[len(calls) - 1]))
        return result

    return calls, call


def test_retriable_errors_are_retried_until_the_call_succeeds() -> None:
    calls, call = failing([KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR])
    assert retrying(call, "offsets of group g", cluster="east") == "ok"
    assert len(calls) == 3


def test_a_restarted_brokers_leaders_are_asked_for_again_before_each_further_attempt() -> None:
    """After a broker restart a long-lived admin client sends the old leader epoch, or keeps the
    "no leaders found" it saw during the election, until its metadata is renewed: the retry renews it."""
    renewed: list[int] = []
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if not renewed:  # refused until the metadata is renewed, however often it is tried
            code = KafkaError._NOENT if len(calls) == 1 else KafkaError.FENCED_LEADER_EPOCH
            raise KafkaException(KafkaError(code))
        return "ok"

    assert retrying(call, "cannot list offsets of t", cluster="east", refresh=lambda: renewed.append(1)) == "ok"
    assert (len(calls), len(renewed)) == (2, 1)


def test_a_partition_without_its_leader_yet_is_retried() -> None:
    """Right after a topic is created (or its leader moves) listing its offsets fails with Kafka's
    NOT_LEADER_OR_FOLLOWER, which librdkafka names NOT_LEADER_FOR_PARTITION and does not flag retriable."""
    assert not KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION).retriable()
    calls, call = failing([KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE])
    assert retrying(call, "cannot list offsets of srm-offset-syncs.internal", cluster="west") == "ok"
    assert len(calls) == 3


def test_every_error_name_matched_on_is_one_librdkafka_gives() -> None:
    """Error lists compare KafkaError.name(): a name librdkafka never gives (Kafka's own
    NOT_LEADER_OR_FOLLOWER, say) would never match, and the error would be handled as unknown."""
    from srm.kafka.retry import RETRIABLE
    from srm.replication import deliveries, kafka_errors

    given = {KafkaError(code).name() for name, code in vars(KafkaError).items() if isinstance(code, int)}
    lists = [RETRIABLE, deliveries.TRANSIENT, deliveries.PURGED, kafka_errors.KNOWN_WRITE_ERRORS]
    assert [name for names in lists for name in names if name not in given] == []


def test_other_errors_fail_at_once_naming_the_call() -> None:
    calls, call = failing([KafkaError.GROUP_AUTHORIZATION_FAILED])
    with pytest.raises(SrmError, match="offsets of group g: ") as raised:
        retrying(call, "offsets of group g", cluster="east")
    assert not isinstance(raised.value, ClusterUnreachableError)
    assert "GROUP_AUTHORIZATION_FAILED: an ACL is missing; `srm-control acls" in str(raised.value)
    assert len(calls) == 1


def test_a_denied_admin_call_names_the_principal_the_operation_and_the_resource() -> None:
    from srm.kafka.clients import admin_client

    scram = {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "mirror"}
    scram |= {"sasl.password": SecretStr("not-used")}
    admin = admin_client(Cluster(alias="east", bootstrap_servers="127.0.0.1:1", client=scram))
    _, call = failing([KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(SrmError) as raised:
        retrying(
            call,
            "cannot create topic 'west.orders'",
            cluster="east",
            needed=needs(admin, "CREATE", "TOPIC 'west.orders'"),
        )
    assert str(raised.value).startswith(
        "cannot create topic 'west.orders': Broker: Topic authorization failed (TOPIC_AUTHORIZATION_FAILED: "
        "User:mirror (clusters.east) needs CREATE on TOPIC 'west.orders'; `srm-control acls"
    ), raised.value


def test_retriable_errors_past_the_deadline_say_the_cluster_is_unreachable() -> None:
    calls, call = failing([KafkaError._TRANSPORT] * 1000)
    with pytest.raises(ClusterUnreachableError, match="list topics"):
        retrying(call, "list topics", timeout_s=0.5, cluster="east")
    assert 2 <= len(calls) < 10  # backoff 0.2 s, 0.4 s, ...


def test_the_unreachable_error_carries_the_alias_of_the_cluster_called() -> None:
    """A continuous flow says which cluster it waits for from this, not from the message's text."""
    _, call = failing([KafkaError._TRANSPORT] * 1000)
    with pytest.raises(ClusterUnreachableError) as raised:
        retrying(call, "cannot list topics on east (127.0.0.1:1)", timeout_s=0.2, cluster="east")
    assert raised.value.cluster == "east"


def test_reading_an_internal_topic_without_its_acl_fails_at_once_naming_it() -> None:
    from srm.kafka.partitions import read_to_end

    class Denied:  # what librdkafka hands a consumer whose principal may not read the topic
        def error(self) -> KafkaError:
            return KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED)

    class Consumer:
        def list_topics(self, topic: str, timeout: float) -> None: ...
        def assign(self, partitions: object) -> None: ...
        def unassign(self) -> None: ...
        def consume(self, count: int, timeout: float) -> list[Denied]:
            return [Denied()]

    with pytest.raises(
        SrmError, match=r"reading srm-owners.internal\[0\]: .*TOPIC_AUTHORIZATION_FAILED.*srm-control acls"
    ):
        list(read_to_end(Consumer(), "srm-owners.internal"))


def test_a_record_fetched_with_the_end_in_one_batch_is_read_not_skipped() -> None:
    """The end reached, then a record written: librdkafka may hand both in one batch. A reader kept
    assigned (srm-control's lists, the monitor's statuses) is past that record afterwards, so the
    read gives it too (the lists edit it held would otherwise never apply)."""
    from srm.kafka.partitions import read_to_end

    class Message:
        def __init__(self, offset: int, error: KafkaError | None = None) -> None:
            self._offset, self._error = offset, error

        def error(self) -> KafkaError | None:
            return self._error

        def offset(self) -> int:
            return self._offset

        def partition(self) -> int:
            return 0

    class Consumer:
        def __init__(self) -> None:
            self.batches = [[Message(0), Message(1, KafkaError(KafkaError._PARTITION_EOF)), Message(1)], [Message(2)]]

        def list_topics(self, topic: str, timeout: float) -> None: ...
        def assign(self, partitions: object) -> None: ...
        def consume(self, count: int, timeout: float) -> list[Message]:
            return self.batches.pop(0)

    read = [m.offset() for m in read_to_end(Consumer(), "srm-control.internal", keep_assigned=True)]
    assert read == [0, 1]  # offset 2 came after the batch that held the end: read by the next poll


def test_a_reader_refused_without_a_break_for_refused_s_fails_naming_its_cluster(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A reader built just before its password was rotated: librdkafka reports the SASL refusal on
    every reconnection (its error_cb); the read ends naming the cluster, not after its timeout."""
    from srm.kafka import clients

    now = [100.0]
    monkeypatch.setattr(clients.time, "monotonic", lambda: now[0])
    refusals = clients.Refusals("east")
    refused = KafkaError(KafkaError._AUTHENTICATION, "SASL authentication error: invalid credentials")
    for _ in range(10):  # refused every second for 9 s: SCRAM credentials may still be on their way
        refusals(refused)
        refusals(KafkaError(KafkaError._TRANSPORT))  # the other errors change nothing
        refusals.check("srm-offset-syncs.west.internal[0]")
        now[0] += 1.0
    refusals(refused)
    with pytest.raises(
        ClusterUnreachableError, match=r"cluster east has refused the client's credentials for 10 s"
    ) as raised:
        refusals.check("srm-offset-syncs.west.internal[0]")
    assert raised.value.cluster == "east"
    assert "reading srm-offset-syncs.west.internal[0]" in str(raised.value)


def test_refusals_further_apart_than_refused_s_or_long_past_start_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    from srm.kafka import clients

    now = [0.0]
    monkeypatch.setattr(clients.time, "monotonic", lambda: now[0])
    refusals = clients.Refusals("east")
    refused = KafkaError(KafkaError._AUTHENTICATION)
    refusals(refused)  # a credential not on the broker yet, at the start
    now[0] = 30.0
    refusals.check("t[0]")  # taken since: nothing refused for 30 s
    refusals(refused)  # one refusal much later starts a streak of its own
    now[0] = 31.0
    refusals.check("t[0]")
    assert refusals.since == 30.0
