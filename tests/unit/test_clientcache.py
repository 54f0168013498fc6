"""A worker's cached clients are kept while their settings resolve the same, and closed and built
again when they do not (a rotated password, a new bootstrap list)."""

from __future__ import annotations

import pytest

from srm.replication.clientcache import ClientCache


class Client:
    def __init__(self, name: str) -> None:
        self.name, self.closed = name, False

    def close(self) -> None:
        self.closed = True


def test_a_client_asked_for_with_other_settings_is_closed_and_built_again() -> None:
    cache, built = ClientCache(), []

    def build() -> Client:
        built.append(Client(f"consumer {len(built)}"))
        return built[-1]

    first = cache.client(("source-consumer", "a->b"), build, "digest-1")
    assert cache.client(("source-consumer", "a->b"), build, "digest-1") is first
    second = cache.client(("source-consumer", "a->b"), build, "digest-2")
    assert second is not first and first.closed and not second.closed
    assert len(built) == 2


def test_a_producer_asked_for_with_other_settings_is_closed_and_built_again() -> None:
    cache = ClientCache()
    first = cache.producer("srm-replicate.a.b.1.0", lambda: Client("p0"), "digest-1")
    assert cache.producer("srm-replicate.a.b.1.0", lambda: Client("unused"), "digest-1") is first
    second = cache.producer("srm-replicate.a.b.1.0", lambda: Client("p1"), "digest-2")
    assert first.closed and second.name == "p1"
    cache.drop_producer("srm-replicate.a.b.1.0")
    assert second.closed


def test_a_build_that_fails_leaves_no_closed_client_behind() -> None:
    cache = ClientCache()
    first = cache.client(("target", "a->b"), lambda: Client("c0"), "digest-1")

    def failing() -> Client:
        raise RuntimeError("the new password is not accepted yet")

    with pytest.raises(RuntimeError):
        cache.client(("target", "a->b"), failing, "digest-2")
    assert first.closed
    again = cache.client(("target", "a->b"), lambda: Client("c1"), "digest-2")
    assert again.name == "c1" and not again.closed, "built afresh, not the closed one handed out"
