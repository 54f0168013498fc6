"""The benchmarks' target watch: a poll of the end offsets counts the partitions that answer."""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from bench.watch import answered_end_offsets


class Leaders:
    """An admin client whose ListOffsets answers with ``ends`` (partition -> end offset), and
    with NOT_LEADER_FOR_PARTITION for the partitions not in it (leaders still being elected)."""

    def __init__(self, ends: dict[int, int]) -> None:
        self.ends = ends
        self.levels: list[Any] = []

    def list_offsets(self, request: dict[Any, Any], isolation_level: Any, request_timeout: float) -> dict[Any, Future]:
        self.levels.append(isolation_level)
        futures: dict[Any, Future] = {}
        for tp in request:
            future: Future = Future()
            if tp.partition in self.ends:
                future.set_result(SimpleNamespace(offset=self.ends[tp.partition]))
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION)))
            futures[tp] = future
        return futures


def test_partitions_whose_leaders_do_not_answer_yet_count_nothing_and_the_poll_says_so() -> None:
    present = [("t", p) for p in range(4)]

    assert answered_end_offsets(Leaders({0: 5, 2: 7}), present, committed=True) == (12, False)
    assert answered_end_offsets(Leaders({0: 0, 1: 0, 2: 0, 3: 0}), present, committed=False) == (0, True)
    assert answered_end_offsets(Leaders({0: 5, 1: 1, 2: 7, 3: 3}), present, committed=True) == (16, True)


def test_a_topic_not_present_yet_is_no_answer() -> None:
    admin = Leaders({})

    assert answered_end_offsets(admin, [], committed=True) == (0, False)
    assert admin.levels == []  # nothing asked
