"""Loops of prefixless (identity) flows: A->B and B->A that both admit the same topic.

With the identity policy a remote topic keeps its name, so MM2's cycle rule cannot see that
``orders`` on B came from A; if B->A also admits ``orders`` every record circulates forever.
Admitting "the same topic" is decided on concrete names: every literal in the flows' ``topics``
lists, a sample string generated from each regex, and a few common names. A loop is reported
only when such a name passes every flow of the cycle, so a report is never a false alarm.

Provenance headers (``provenance.headers.enabled``, srm/replication/provenance.py) make a loop of two
clusters safe when both flows have them: a record never goes back to its origin. Nothing makes a loop
of three or more safe: a record could reach a cluster by two paths, and a topic's offsets could not be
translated from two flows' runs (srm/offsets/merged.py). For the same reason a third prefixless flow
may not write a topic that a pair replicates both ways: the pair's translation counts only the
records of its two clusters.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

from srm.config.model import Flow
from srm.config.regexsample import sample_match
from srm.config.yamlsource import YamlDocument
from srm.errors import ConfigIssue
from srm.filters import NameFilter, should_replicate_topic

COMMON_NAMES = ("orders", "events", "t", "topic", "test")


def loop_issues(doc: YamlDocument, flows: list[Flow], indexes: dict[str, int]) -> list[ConfigIssue]:
    def issue(flow: Flow, message: str) -> ConfigIssue:
        found = doc.issue(("flows", indexes[flow.name]), message)
        found.flow = flow.name
        return found

    issues = [
        issue(
            flow,
            f"flow {flow.name}: provenance.headers.enabled is for prefixless (identity) flows; this flow renames "
            "remote topics (MM2's cycle rule already stops loops): remove it, or set "
            "replication.policy.class: identity",
        )
        for flow in flows
        if flow.settings.provenance_headers_enabled and not flow.prefixless
    ]
    prefixless = [f for f in flows if f.enabled and f.prefixless]
    pairs = []
    for cycle in _cycles(prefixless, indexes):
        topic = _common_topic(cycle)
        if topic is None:
            continue
        if len(cycle) == 2 and all(f.settings.provenance_headers_enabled for f in cycle):
            pairs.append(cycle)
            continue
        chain = " -> ".join(f"{f.source}:{topic}" for f in cycle) + f" -> {cycle[0].source}:{topic} -> ..."
        names = " and ".join(f.name for f in cycle)
        if len(cycle) > 2:
            message = (
                f"prefixless (identity) flows {names} form a loop of {len(cycle)} clusters: all admit topic "
                f"{topic!r} ({chain}); a loop of three or more prefixless clusters cannot be made safe, not even "
                "with provenance headers (a record could reach a cluster by two paths); exclude the topic on one "
                "flow of the loop (topics.exclude), or use the default policy"
            )
        else:
            message = (
                f"prefixless (identity) flows {names} form a loop: all admit topic {topic!r}, "
                f"so its records would circulate forever ({chain}); set provenance.headers.enabled: true on "
                "both flows (a record never goes back to its origin), exclude the topic in one "
                "direction (topics.exclude), or use the default policy"
            )
        issues.append(issue(cycle[0], message))
    issues += _into_pairs(prefixless, pairs, issue)
    return issues


Report = Callable[[Flow, str], ConfigIssue]


def _into_pairs(prefixless: list[Flow], pairs: list[list[Flow]], issue: Report) -> Iterator[ConfigIssue]:
    """A third prefixless flow writing a topic that an active/active pair replicates both ways."""
    for pair in pairs:
        clusters = {pair[0].source, pair[0].target}
        for flow in prefixless:
            if flow.target not in clusters or flow.source in clusters:
                continue
            topic = _common_topic([flow, *pair])
            if topic is not None:
                yield issue(
                    flow,
                    f"prefixless flow {flow.name} writes topic {topic!r} into {flow.target}, which "
                    f"{pair[0].name} and {pair[1].name} replicate both ways without prefixes: their offset "
                    f"translation counts only the records of {pair[0].source} and {pair[0].target}; exclude the "
                    f"topic from {flow.name} (topics.exclude), or use the default policy on it",
                )


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
