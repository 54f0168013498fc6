"""A flow's exact sync history, as the checkpoint job and the translation API need it.

Rows come from the warehouse table ``offset_sync_history`` plus the tail of the history topic
that the replication job has committed but not yet moved to the warehouse, so translation always
sees every transaction committed so far. Only the runs of a partition's current topic
incarnation (its latest topic id) count: offsets restart when a topic is recreated.

A read names what it needs (:class:`Wanted`): per partition, the lowest source offset it will
translate, or the whole partition. Partitions and offsets are pushed into the scan: a lookup
reads its partitions' row groups from a little before its offset on, never the table, whatever
the history the retention keeps (:mod:`srm.offsets.retention`). Rows stay in Arrow.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from srm.config.model import Flow, SrmConfig
from srm.kafka import clients
from srm.kafka.internal_topics import history_topic_name
from srm.offsets.flow_history import FlowHistory, Key, build_history, partition_spans
from srm.replication.history import HistoryIngest
from srm.storage.row_groups import Bounds
from srm.storage.warehouse import SYNC_HISTORY, Warehouse

COLUMNS = ["topic", "partition", "topic_id", "source_first", "target_first", "length", "next_offset", "history_offset"]
# How far below the lowest offset to translate a windowed read starts. A continuous copy's runs are
# a transaction's records of one partition (a few at a steady load, thousands in an available-now
# chunk), so the run holding the offset mostly starts inside the first window; a partition where it
# does not is read again from the next, deeper one, and then whole. Each window costs its rows: at
# 5,000 records/s over 64 partitions (4 records a run) 10,000 offsets were 2,500 runs a partition.
LOOKBACKS = (1_000, 10_000)
# Partitions per scan: its row groups are chosen for them, and its rows kept by a join with them.
PARTITIONS_PER_SCAN = 2_000


@dataclass(frozen=True)
class Wanted:
    """What a read needs: per partition, None for all of its runs, else the lowest source offset
    that will be translated (the runs from the one holding it on). ``every``: the whole flow."""

    partitions: Mapping[Key, int | None] = field(default_factory=dict)
    every: bool = False

    @classmethod
    def whole(cls, partitions: Iterable[Key]) -> Wanted:
        return cls(dict.fromkeys(partitions))

    @classmethod
    def lowest(cls, positions: Iterable[tuple[Key, int]]) -> Wanted:
        """The lowest of each partition's positions."""
        low: dict[Key, int | None] = {}
        for key, position in positions:
            current = low.get(key)
            low[key] = position if current is None else min(current, position)
        return cls(low)


def load_history(
    config: SrmConfig,
    flow: Flow,
    wanted: Wanted | None = None,
    *,
    current: Mapping[str, str] | None = None,
    tail: Any = None,
) -> FlowHistory:
    """The runs of ``flow`` committed so far (warehouse + history topic tail) that ``wanted`` needs
    (default: every partition, whole); ``current``: the source topics' topic ids now, if known;
    ``tail``: the topic's tail (:func:`topic_tail`) when the caller has read it already."""
    warehouse = Warehouse(config.storage.warehouse)
    tail = topic_tail(config, flow) if tail is None else tail
    return read_history(warehouse, flow.name, wanted or Wanted(every=True), tail, current)


def read_history(
    warehouse: Warehouse, flow: str, wanted: Wanted, tail: Any, current: Mapping[str, str] | None = None
) -> FlowHistory:
    """What ``wanted`` needs of ``flow``'s history in ``warehouse`` and ``tail`` (Arrow rows not
    ingested yet). ``current``: the source topics' topic ids now (a caller that asked the source);
    else the warehouse is asked whether another incarnation's rows lie outside a window."""
    lookback = LOOKBACKS[0]
    history = build_history(flow, _window(warehouse, flow, wanted, tail, lookback))
    for deeper in (*LOOKBACKS[1:], None):
        again = [] if wanted.every else _uncovered(history, wanted, lookback)
        if not again:
            break
        # the window missed the run holding the offset: those partitions from deeper, at last whole
        retry = Wanted.whole(again) if deeper is None else Wanted({k: wanted.partitions[k] for k in again})
        rest = history.runs.filter(_not_in(again))
        reread = build_history(flow, _window(warehouse, flow, retry, tail, deeper or 0))
        history = _merge(flow, history, rest, reread, again)
        lookback = deeper or 0
    # A window may hold only an older incarnation (a topic recreated and copied again from 0, its
    # old runs not pruned yet, a position from before): read whole, the latest rows decide.
    windowed = {
        k: history.topic_ids[k] for k, low in wanted.partitions.items() if low is not None and k in history.topic_ids
    }
    if current is not None:  # the window holds the source topic's incarnation now: none newer was copied
        mixed = sorted(k for k, topic_id in windowed.items() if current.get(k[0]) != topic_id)
    else:
        mixed = _other_incarnations(warehouse, flow, windowed, tail)
    if mixed:
        whole = build_history(flow, _window(warehouse, flow, Wanted.whole(mixed), tail, 0))
        history = _merge(flow, history, history.runs.filter(_not_in(mixed)), whole, mixed)
    return history


def _other_incarnations(warehouse: Warehouse, flow: str, ids: dict[Key, str], tail: Any) -> list[Key]:
    """The partitions of ``ids`` (partition -> its window's topic id) with rows of another topic id
    in the warehouse or the ``tail``: three columns of the row groups whose statistics allow one."""
    import pyarrow.compute as pc

    items = sorted(ids.items())
    found = _differing(tail, items)
    for start in range(0, len(items), PARTITIONS_PER_SCAN):
        chunk = items[start : start + PARTITIONS_PER_SCAN]
        groups = PartitionGroups(chunk, _another_id)
        rows = warehouse.scan(SYNC_HISTORY, pc.field("flow") == flow, ["topic", "partition", "topic_id"], groups=groups)
        found |= _differing(rows, chunk)
    return sorted(found)


def _differing(rows: Any, items: list[tuple[Key, str]]) -> set[Key]:
    """The partitions of ``items`` ((partition, topic id)) that ``rows`` hold another topic id of."""
    import pyarrow.compute as pc

    if rows is None or rows.num_rows == 0 or not items:
        return set()
    ids = [i for _, i in items]
    joined = _joined(
        rows.select(["topic", "partition", "topic_id"]), items, "_id", ids, rows.schema.field("topic_id").type
    )
    other = joined.filter(pc.field("topic_id") != pc.field("_id"))
    return set(zip(other["topic"].to_pylist(), other["partition"].to_pylist(), strict=True))


def _window(warehouse: Warehouse, flow: str, wanted: Wanted, tail: Any, lookback: int) -> Any:
    """The rows ``wanted`` names, from ``lookback`` below each lowest offset, of the warehouse and
    the topic's ``tail``."""
    return _concat([scan(warehouse, flow, wanted, lookback), _select(tail, wanted, lookback)])


def topic_tail(config: SrmConfig, flow: Flow) -> Any:
    """The history committed to the topic but not yet ingested into the warehouse, as Arrow rows."""
    import pyarrow as pa

    from srm.storage.warehouse import _schemas

    warehouse = Warehouse(config.storage.warehouse)
    target = config.cluster(flow.target)
    ingest = HistoryIngest(warehouse, flow, target, history_topic_name(flow), clients.admin_client(target))
    try:
        _, _, rows = ingest.tail()
    finally:
        ingest.close()
    return pa.Table.from_pylist(rows, schema=_schemas()[SYNC_HISTORY]).select(COLUMNS)


def history_topics(config: SrmConfig, flow: Flow, topics: Iterable[str]) -> set[str]:
    """Which of ``topics`` the flow's history in the warehouse holds anything of (the topic column
    alone is read)."""
    import pyarrow.compute as pc

    where = (pc.field("flow") == flow.name) & pc.field("topic").isin(sorted(topics))
    found = Warehouse(config.storage.warehouse).scan(SYNC_HISTORY, where, ["topic"])
    return set() if found is None else {str(t) for t in pc.unique(found["topic"]).to_pylist()}


# --- reading ----------------------------------------------------------------------------------
def scan(warehouse: Warehouse, flow: str, wanted: Wanted, lookback: int = LOOKBACKS[-1]) -> Any:
    """The warehouse rows of ``flow`` that ``wanted`` names (from ``lookback`` below each lowest
    offset), filters pushed into the scan."""
    import pyarrow.compute as pc

    base = pc.field("flow") == flow
    if wanted.every:
        return _or_empty(warehouse.scan(SYNC_HISTORY, base, COLUMNS))
    items = sorted(wanted.partitions.items())
    parts = [_or_empty(None)]
    for start in range(0, len(items), PARTITIONS_PER_SCAN):
        chunk = items[start : start + PARTITIONS_PER_SCAN]
        found = warehouse.scan(SYNC_HISTORY, base, COLUMNS, groups=PartitionGroups(chunk, _from(lookback)))
        parts.append(_keep(_or_empty(found), chunk, lookback))
    return _concat(parts)


def _keep(rows: Any, items: list[tuple[Key, int | None]], lookback: int) -> Any:
    """The ``rows`` of the partitions ``items`` names, from each one's window on: a join with them
    (the OR of a term per partition, evaluated on every row, cost several times as much)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if rows.num_rows == 0:
        return rows
    lows = [None if low is None else low - lookback for _, low in items]
    joined = _joined(rows, items, "_from", lows, pa.int64())
    return joined.filter(pc.field("_from").is_null() | (pc.field("source_first") >= pc.field("_from"))).select(COLUMNS)


def _joined(rows: Any, items: list[tuple[Key, Any]], column: str, values: list[Any], kind: Any) -> Any:
    """``rows`` of the partitions of ``items``, each with ``column`` (``values``, one a partition)."""
    import pyarrow as pa

    topics = pa.array([t for (t, _), _ in items], rows.schema.field("topic").type)
    partitions = pa.array([p for (_, p), _ in items], rows.schema.field("partition").type)
    by = pa.table({"topic": topics, "partition": partitions, column: pa.array(values, kind)})
    return rows.join(by, ["topic", "partition"], join_type="inner", use_threads=False)


class PartitionGroups:
    """Whether a row group may hold rows of the partitions ``items`` (partition, value), by its
    statistics: a partition within its topic and partition ranges whose ``term(value, bounds)``
    holds. The partitions in its topic range are found by bisection: a group of a file sorted by
    topic and partition checks its own few, whatever the number of partitions asked."""

    def __init__(self, items: Iterable[tuple[Key, Any]], term: Callable[[Any, Bounds], bool]) -> None:
        self.items = sorted(items, key=lambda item: item[0])
        self.keys = [key for key, _ in self.items]
        self.term = term

    def __call__(self, bounds: Bounds) -> bool:
        topics, partitions = bounds.get("topic"), bounds.get("partition")
        if topics is None or partitions is None:
            return True  # no statistics: it may hold anything
        start = bisect.bisect_left(self.keys, (topics[0],))
        end = bisect.bisect_right(self.keys, (topics[1], math.inf))
        return any(
            partitions[0] <= partition <= partitions[1] and self.term(value, bounds)
            for (_, partition), value in self.items[start:end]
        )


def _from(lookback: int) -> Callable[[int | None, Bounds], bool]:
    """A partition's term of a windowed read: runs from ``lookback`` below its lowest offset on."""

    def term(low: int | None, bounds: Bounds) -> bool:
        firsts = bounds.get("source_first")
        return low is None or firsts is None or firsts[1] >= low - lookback

    return term


def _another_id(topic_id: str, bounds: Bounds) -> bool:
    """A partition's term of :func:`_other_incarnations`: a topic id besides ``topic_id``."""
    ids = bounds.get("topic_id")
    return ids is None or ids != (topic_id, topic_id)


def _select(rows: Any, wanted: Wanted, lookback: int) -> Any:
    """``rows`` filtered as ``scan`` filters the warehouse (for the topic's tail, in memory)."""
    if wanted.every or rows.num_rows == 0:
        return rows
    if not wanted.partitions:
        return rows.slice(0, 0)
    return _keep(rows, sorted(wanted.partitions.items()), lookback)


def _or_empty(table: Any) -> Any:
    import pyarrow as pa

    from srm.storage.warehouse import _schemas

    return pa.schema(_schemas()[SYNC_HISTORY]).empty_table().select(COLUMNS) if table is None else table


def _concat(tables: list[Any]) -> Any:
    import pyarrow as pa

    return pa.concat_tables([t.select(COLUMNS) for t in tables])


def _not_in(keys: list[Key]) -> Any:
    """The filter of rows of none of ``keys``."""
    import pyarrow.compute as pc

    where = None
    for topic, partition in keys:
        term = (pc.field("topic") == topic) & (pc.field("partition") == partition)
        where = term if where is None else where | term
    return pc.scalar(True) if where is None else ~where


def _uncovered(history: FlowHistory, wanted: Wanted, lookback: int) -> list[Key]:
    """Partitions read from an offset whose result may miss what translating it needs: no run of
    the current incarnation at or below the offset (it may start below the window), or nothing
    read at all (the partition's rows may all lie below the window)."""
    import pyarrow.compute as pc

    out = []
    for key, low in sorted(wanted.partitions.items()):
        if low is None or low <= lookback:
            continue  # read whole already: the window starts at or below 0
        first, count = history.spans.get(key, (0, 0))
        if count == 0 or pc.min(history.runs["source_first"].slice(first, count)).as_py() > low:
            out.append(key)
    return out


def _merge(flow: str, windowed: FlowHistory, rest: Any, whole: FlowHistory, again: list[Key]) -> FlowHistory:
    """``windowed`` with the partitions ``again`` replaced by their whole history."""
    import pyarrow as pa

    runs = pa.concat_tables([rest, whole.runs]).sort_by(
        [("topic", "ascending"), ("partition", "ascending"), ("source_first", "ascending")]
    )
    replaced = set(again)
    progress = {k: v for k, v in windowed.progress.items() if k not in replaced} | whole.progress
    topic_ids = {k: v for k, v in windowed.topic_ids.items() if k not in replaced} | whole.topic_ids
    return FlowHistory(flow, runs, progress, partition_spans(runs), topic_ids)
