"""Loops of prefixless (identity) flows: A->B and B->A that both admit the same topic.

With the identity policy a remote topic keeps its name, so MM2's cycle rule cannot see that
``orders`` on B came from A; if B->A also admits ``orders`` every record circulates forever.
Admitting "the same topic" is decided exactly: the flows' ``topics`` and ``topics.exclude`` regexes
become automata (interegular), whose intersection holds every topic name all flows of the cycle
admit; its shortest names (after the flows' literal names and a few common ones, for a readable
message) are checked against every rule of the flows (internal and heartbeats topics). A loop is
reported only when such a name passes every flow of the cycle, so a report is never a false alarm.
A regex interegular does not model (a back-reference, a look-around) leaves the literal and common
names only.

Provenance headers (``provenance.headers.enabled``, srm/replication/provenance.py) make a loop of two
clusters safe when both flows have them: a record never goes back to its origin. Nothing makes a loop
of three or more safe: a record could reach a cluster by two paths, and a topic's offsets could not be
translated from two flows' runs (srm/offsets/merged.py). For the same reason a third prefixless flow
may not write a topic that a pair replicates both ways: the pair's translation counts only the
records of its two clusters.
"""

from __future__ import annotations

import functools
import itertools
import operator
import re
from collections.abc import Callable, Iterable, Iterator

from interegular import FSM, InvalidSyntax, Unsupported, parse_pattern

from srm.config.filters import NameFilter, should_replicate_topic
from srm.config.model import Flow
from srm.config.yamlsource import YamlDocument
from srm.errors import ConfigIssue

COMMON_NAMES = ("orders", "events", "t", "topic", "test")
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._\-]+")  # the characters Kafka allows in a topic name
SHORTEST = 50  # names of the flows' common language tried against their other rules, shortest first


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
            literal = re.sub(r"\\(.)", r"\1", pattern)  # a literal name written with escapes (orders\.eu)
            if TOPIC_NAME.fullmatch(literal):
                yield literal
    yield from COMMON_NAMES
    common = _common_language(flows)
    if common is not None:
        for symbols in itertools.islice(common.strings(), SHORTEST):  # type: ignore[no-untyped-call]
            if all(isinstance(s, str) for s in symbols):
                yield "".join(symbols)


def _common_language(flows: list[Flow]) -> FSM | None:
    """The topic names every flow's ``topics`` admits and its ``topics.exclude`` does not, as one
    automaton; None if a regex uses a construct interegular does not model."""
    try:
        languages = [_language(flow) for flow in flows]
    except (Unsupported, InvalidSyntax, ValueError, RecursionError):
        return None
    return functools.reduce(operator.and_, languages, parse_pattern(TOPIC_NAME.pattern).to_fsm())


def _language(flow: Flow) -> FSM:
    def union(patterns: Iterable[str]) -> FSM | None:
        fsms = [parse_pattern(p).to_fsm() for p in patterns]
        return functools.reduce(operator.or_, fsms) if fsms else None

    admitted = union(flow.settings.topics)
    if admitted is None:
        return parse_pattern("[^\\s\\S]").to_fsm()  # nothing
    excluded = union(flow.settings.topics_exclude)
    return admitted if excluded is None else admitted - excluded


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
