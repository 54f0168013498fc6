"""Loops of prefixless (identity) flows: A->B and B->A that both admit the same topic.

With the identity policy a remote topic keeps its name, so MM2's cycle rule cannot see that
``orders`` on B came from A; if B->A also admits ``orders`` every record circulates forever.
Admitting "the same topic" is decided on concrete names: every literal in the flows' ``topics``
lists, a sample string generated from each regex, and a few common names. A loop is reported
only when such a name passes every flow of the cycle, so a report is never a false alarm.

Provenance headers (``provenance.headers.enabled``, srm/replication/provenance.py) make a loop safe
when every flow of it has them: a record never goes back to its origin, and with
``provenance.max.hops: 1`` never further than one hop, so in a loop of three or more clusters no
record reaches a cluster twice either. A loop of three or more with more hops allowed stays refused:
a record could arrive by two paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from srm.config.model import Flow
from srm.config.regexsample import sample_match
from srm.config.yamlsource import YamlDocument
from srm.errors import ConfigIssue
from srm.filters import NameFilter, should_replicate_topic

COMMON_NAMES = ("orders", "events", "t", "topic", "test")


def loop_issues(doc: YamlDocument, flows: list[Flow], indexes: dict[str, int]) -> list[ConfigIssue]:
    prefixless = [f for f in flows if f.enabled and f.prefixless]
    issues = []
    for cycle in _cycles(prefixless, indexes):
        topic = _common_topic(cycle)
        if topic is None or _safe(cycle):
            continue
        first = cycle[0]
        chain = " -> ".join(f"{f.source}:{topic}" for f in cycle) + f" -> {first.source}:{topic} -> ..."
        names = " and ".join(f.name for f in cycle)
        if all(f.settings.provenance_headers_enabled for f in cycle):
            message = (
                f"prefixless (identity) flows {names} form a loop of {len(cycle)} clusters with "
                f"provenance.max.hops above 1: all admit topic {topic!r}, whose records could reach a cluster "
                f"twice ({chain}); set provenance.max.hops: 1 on every flow of the loop"
            )
        else:
            message = (
                f"prefixless (identity) flows {names} form a loop: all admit topic {topic!r}, "
                f"so its records would circulate forever ({chain}); set provenance.headers.enabled: true on "
                "every flow of the loop (a record never goes back to its origin), exclude the topic in one "
                "direction (topics.exclude), or use the default policy"
            )
        issue = doc.issue(("flows", indexes[first.name]), message)
        issue.flow = first.name
        issues.append(issue)
    return issues


def _safe(cycle: list[Flow]) -> bool:
    """Provenance makes the loop safe: on every flow, and one hop at most unless two clusters."""
    settings = [f.settings for f in cycle]
    if not all(s.provenance_headers_enabled for s in settings):
        return False
    return len(cycle) == 2 or all(s.provenance_max_hops == 1 for s in settings)


def _cycles(flows: list[Flow], indexes: dict[str, int]) -> Iterator[list[Flow]]:
    """Each simple cycle once, starting at the flow that comes first in the file."""
    by_source: dict[str, list[Flow]] = {}
    for flow in flows:
        by_source.setdefault(flow.source, []).append(flow)

    def walk(start: Flow, path: list[Flow]) -> Iterator[list[Flow]]:
        for nxt in by_source.get(path[-1].target, []):
            if nxt is start:
                yield list(path)
            elif nxt not in path and indexes[nxt.name] > indexes[start.name]:
                yield from walk(start, [*path, nxt])

    for flow in sorted(flows, key=lambda f: indexes[f.name]):
        yield from walk(flow, [flow])


def _candidates(flows: list[Flow]) -> Iterator[str]:
    for flow in flows:
        for pattern in flow.settings.topics:
            sample = sample_match(pattern)
            if sample:
                yield sample
            yield re.sub(r"\\(.)", r"\1", pattern)  # a literal name written with escapes (orders\.eu)
    yield from COMMON_NAMES


def _common_topic(cycle: list[Flow]) -> str | None:
    for topic in _candidates(cycle):
        if all(_admits(flow, topic) for flow in cycle):
            return topic
    return None


def _admits(flow: Flow, topic: str) -> bool:
    s = flow.settings
    return should_replicate_topic(
        topic,
        target=flow.target,
        policy=flow.policy,
        topics=NameFilter(s.topics, s.topics_exclude),
        heartbeats_replication_enabled=s.heartbeats_replication_enabled,
    ) and not flow.policy.is_heartbeats_topic(topic)
