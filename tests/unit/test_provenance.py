"""The provenance rule of a flow: which records are copied and with which headers."""

from __future__ import annotations

from srm.replication.provenance import Provenance

A_TO_B = Provenance("a", "b", max_hops=1)


def test_a_record_produced_on_the_source_gets_its_origin_and_first_hop_after_its_own_headers() -> None:
    assert A_TO_B.headers(None) == [("srm.origin", b"a"), ("srm.hops", b"1")]
    assert A_TO_B.headers([("trace", b"x"), ("trace", None)]) == [
        ("trace", b"x"),
        ("trace", None),
        ("srm.origin", b"a"),
        ("srm.hops", b"1"),
    ]


def test_a_record_from_the_target_is_never_copied_back() -> None:
    from_b = [("srm.origin", b"b"), ("srm.hops", b"1")]
    assert A_TO_B.headers(from_b) is None
    assert Provenance("a", "b", max_hops=5).headers(from_b) is None


def test_the_hop_limit_counts_copies_and_updates_the_count_in_place() -> None:
    from_c = [("k", b"v"), ("srm.origin", b"c"), ("srm.hops", b"1"), ("z", b"")]
    assert A_TO_B.headers(from_c) is None  # one hop: only records produced on a
    assert Provenance("a", "b", max_hops=2).headers(from_c) == [
        ("k", b"v"),
        ("srm.origin", b"c"),
        ("srm.hops", b"2"),
        ("z", b""),
    ]
    assert Provenance("a", "b", max_hops=2).headers([("srm.origin", b"c"), ("srm.hops", b"2")]) is None
    assert Provenance("a", "b", max_hops=9).headers([("srm.origin", b"c"), ("srm.hops", b"??")]) is None
