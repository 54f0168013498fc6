"""bench.aggregation's pure parts: MirrorMaker 2's properties for many sources, the exactly-once check."""

from __future__ import annotations

from bench.aggregation import exactly_once, mm2_aggregation


def test_mm2_gets_one_list_of_clusters_and_a_flow_from_each_source_into_the_target() -> None:
    text = mm2_aggregation({"a": "h:1", "b": "h:2"}, ("t", "h:9"), "bench-.*", 8)
    lines = text.splitlines()
    assert [line for line in lines if line.startswith("clusters")] == ["clusters = a, b, t"]
    for source, servers in (("a", "h:1"), ("b", "h:2")):
        assert f"{source}.bootstrap.servers = {servers}" in lines
        assert f"{source}->t.enabled = true" in lines
        assert f"{source}->t.topics = bench-.*" in lines
        assert f"{source}->t.tasks.max = 8" in lines
    assert lines.count("t.bootstrap.servers = h:9") == 1
    assert "refresh.topics.interval.seconds = 5" in lines
    assert not [line for line in lines if line.startswith("tasks.max")]


def test_every_sequence_number_once_and_in_order_or_counted_as_what_it_is() -> None:
    assert exactly_once({"x": [0, 1, 2], "y": [0, 1, 2]}, 3) == {"missing": 0, "duplicated": 0, "out_of_order": 0}
    assert exactly_once({"x": [0, 2, 1, 1], "y": [0]}, 3) == {"missing": 2, "duplicated": 1, "out_of_order": 1}
