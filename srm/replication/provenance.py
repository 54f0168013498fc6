"""Provenance headers: loop-safe prefixless (identity) replication in both directions.

With the identity policy ``orders`` on A and ``orders`` on B are the same name, so MM2's rule (a
remote topic's name tells where it came from) cannot stop A->B and B->A from copying each other's
copies forever. With ``provenance.headers.enabled`` every record a flow writes carries two headers:

- ``srm.origin``: the alias of the cluster where the record was first produced;
- ``srm.hops``: how many flows have copied it (decimal).

A flow S->T copies a record only if its origin is not T (it would go back where it came from) and it
has been copied fewer than ``provenance.max.hops`` times (default 1: only records produced on S; more
lets a chain A->B->C pass A's records on). A record without the headers was produced on S. Which
topologies are safe is decided in srm/config/loops.py. The record's own headers are kept, in order; the two are
added after them (or updated in place).
"""

from __future__ import annotations

ORIGIN = "srm.origin"
HOPS = "srm.hops"


class Provenance:
    """The provenance rule of one flow ``source`` -> ``target``."""

    def __init__(self, source: str, target: str, max_hops: int) -> None:
        self.source = source.encode()
        self.target = target.encode()
        self.max_hops = max_hops
        self._first_hop = [(ORIGIN, self.source), (HOPS, b"1")]

    def headers(self, headers: list[tuple[str, bytes | None]] | None) -> list[tuple[str, bytes | None]] | None:
        """The headers to write for a record with ``headers``, or None when the record is not copied."""
        if not headers:
            return list(self._first_hop)
        origin = hops = None
        for name, value in headers:
            if name == ORIGIN:
                origin = value
            elif name == HOPS:
                hops = value
        if origin is None:
            return [*headers, *self._first_hop]
        if origin == self.target:
            return None
        count = _count(hops)
        if count >= self.max_hops:
            return None
        return [(name, str(count + 1).encode() if name == HOPS else value) for name, value in headers]


def _count(hops: bytes | None) -> int:
    """The hop count of a header value; a record whose count cannot be read has gone too far."""
    try:
        return int(hops or b"")
    except ValueError:
        return 1 << 30
