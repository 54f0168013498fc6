"""Consumer groups on one cluster: which exist, their state, their committed offsets, and writes.

Group offsets are read with ``AdminClient.list_consumer_group_offsets`` only after
``describe_consumer_groups`` has answered for the same groups: librdkafka 2.16 crashes the process
when an offsets request meets NOT_COORDINATOR (librdkafka issue #5040), which happens while a
coordinator is loading or moving; describing first waits that phase out (describe handles those
answers as ordinary retriable errors).
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from srm.errors import SrmError
from srm.kafka.retry import acl_hint, is_retriable, needs, retrying

ADMIN_TIMEOUT_S = 30.0
WARM_UP_S = 60.0  # a coordinator loads its log in seconds; a fresh cluster creates __consumer_offsets first


@dataclass(frozen=True)
class GroupState:
    group: str
    state: str  # EMPTY, STABLE, PREPARING_REBALANCE, COMPLETING_REBALANCE, DEAD (does not exist), UNKNOWN
    members: int

    @property
    def writable(self) -> bool:
        """Offsets may be written: nobody consumes with this group right now."""
        return self.members == 0 and self.state in ("EMPTY", "DEAD")


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str = ""


@dataclass
class GroupOffsets:
    group: str
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)


def list_groups(admin: Any) -> list[str]:
    """Every consumer group the cluster knows (consumer and classic protocol)."""

    def request() -> list[str]:
        result = admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S).result(timeout=ADMIN_TIMEOUT_S)
        return sorted(g.group_id for g in result.valid)

    return retrying(request, "cannot list consumer groups", cluster=admin.srm_alias)


def describe_groups(admin: Any, groups: Iterable[str]) -> dict[str, GroupState]:
    """State and member count of ``groups``; retries until every coordinator has answered."""
    from confluent_kafka import KafkaException

    pending = sorted(set(groups))
    states: dict[str, GroupState] = {}
    deadline = time.monotonic() + WARM_UP_S
    while pending:
        futures = admin.describe_consumer_groups(pending, request_timeout=ADMIN_TIMEOUT_S)
        retry = []
        for group, future in futures.items():
            try:
                info = future.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as exc:
                error = exc.args[0]
                if is_retriable(error) and time.monotonic() < deadline:
                    retry.append(group)
                    continue
                detail = acl_hint(error, needs(admin, "DESCRIBE", f"GROUP {group!r}"))
                raise SrmError(f"cannot describe consumer group {group!r}: {detail}") from None
            states[group] = GroupState(group, _state_name(info.state), len(info.members or []))
        pending = retry
        if pending:
            time.sleep(0.3)
    return states


def _state_name(state: Any) -> str:
    name = getattr(state, "name", str(state))
    return str(name).upper()


def group_offsets(admin: Any, groups: Iterable[str]) -> dict[str, GroupOffsets]:
    """Committed offsets of ``groups`` (each described first, see the module's note)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    wanted = sorted(set(groups))
    describe_groups(admin, wanted)

    def request() -> dict[str, GroupOffsets]:
        futures = {
            g: admin.list_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(g)], require_stable=True, request_timeout=ADMIN_TIMEOUT_S
            )[g]
            for g in wanted
        }
        out = {}
        for group, future in futures.items():
            result = future.result(timeout=ADMIN_TIMEOUT_S)
            offsets = {
                (tp.topic, tp.partition): CommittedOffset(tp.offset, tp.metadata or "")
                for tp in result.topic_partitions or []
                if tp.offset >= 0
            }
            out[group] = GroupOffsets(group, offsets)
        return out

    groups_named = ", ".join(map(repr, wanted))
    return retrying(
        request,
        "cannot read consumer group offsets",
        cluster=admin.srm_alias,
        needed=needs(admin, "DESCRIBE", f"GROUP {groups_named}"),
    )


def alter_group_offsets(admin: Any, group: str, offsets: dict[tuple[str, int], int]) -> str | None:
    """Write ``offsets`` for ``group``; None on success, else why the broker refused (e.g. not empty)."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition

    request = ConsumerGroupTopicPartitions(group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())])
    try:
        result = admin.alter_consumer_group_offsets([request], request_timeout=ADMIN_TIMEOUT_S)[group].result(
            timeout=ADMIN_TIMEOUT_S
        )
    except KafkaException as exc:
        return acl_hint(exc.args[0], needs(admin, "READ", f"GROUP {group!r}"))
    failed = [tp for tp in result.topic_partitions or [] if tp.error is not None]
    return f"{failed[0].error.str()} ({len(failed)} partition(s))" if failed else None
