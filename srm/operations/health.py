"""Is a flow healthy, how far behind is it, since when: the facts ``srm-control status`` prints and
``GET /v2/replications`` serves, from one function.

A flow is
- ``paused`` when its replicate DAG is paused in Airflow (known where Airflow's database is);
- ``failed`` when a replicate task failed for good after the newest replicated heartbeat;
- ``waiting`` when its run said it waits for a cluster that does not answer (srm.replication.flow_state)
  and no heartbeat replicated since: "waiting for us-east since T", whether or not the clusters answer
  this request;
- ``unreachable`` when the monitoring service finds its source or target not answering (and it is
  neither paused nor failed, nor said by its run to be waiting): "us-east unreachable since T: ...";
- ``running`` when a heartbeat replicated within ``ALIVE_S`` (as the heartbeats DAG's stall check);
- ``stalled`` otherwise, with the heartbeat's age as the reason.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from srm.config.model import Cluster, Flow, SrmConfig
from srm.errors import ClusterUnreachableError, SrmError
from srm.kafka import clients
from srm.kafka.control_lists import read_lists
from srm.kafka.partitions import list_offsets, read_to_end
from srm.kafka.topics import partition_counts
from srm.maintenance.heartbeats import freshness
from srm.replication.flow_state import FAILED, WAITING
from srm.replication.progress import read_flow_progress
from srm.replication.selector import TopicSelector
from srm.storage.warehouse import DATA_LOSS, FLOW_STATES, TASK_FAILURES, Warehouse

ALIVE_S = 120.0  # as the heartbeats DAG's stall sensor: a newer replicated heartbeat means running
STATUS_READ_S = 10.0  # reading the newest records of an internal topic
UNREACHABLE = "unreachable"  # a cluster of the flow does not answer the monitoring service
STATES = ("running", "waiting", "stalled", "failed", "paused", UNREACHABLE, "unknown")


@dataclass
class FlowHealth:
    flow: str
    source: str
    target: str
    state: str = "unknown"
    reason: str = ""
    since: str | None = None  # ISO time the state was entered, when known
    heartbeat_age_s: float | None = None
    checkpoint_age_s: float | None = None
    lag: dict[str, int] = field(default_factory=dict)
    last_error: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def assess(
    now_ms: int,
    heartbeat_ms: int | None,
    paused: bool | None,
    failure: dict[str, Any] | None,
    replicate_dag: str,
    *,
    waiting: dict[str, Any] | None = None,
) -> tuple[str, str, str | None]:
    """State, reason and since-when from the facts (pure). ``waiting``: the flow's newest
    flow_states row."""
    if paused:
        return "paused", f"DAG {replicate_dag} is paused in Airflow", None
    if failure and failure["dag_id"] == replicate_dag:
        failed_ms = _ms(failure["failed_at"])
        if heartbeat_ms is None or failed_ms > heartbeat_ms:  # no heartbeat crossed since: not recovered
            return "failed", f"task {failure['task_id']} failed: {_first_line(failure['error'])}", _iso(failed_ms)
    said = _run_said(waiting, heartbeat_ms)
    if said is not None:
        return said
    if heartbeat_ms is None:
        return "stalled", "no heartbeat has been replicated yet", None
    age_s = (now_ms - heartbeat_ms) / 1000
    if age_s <= ALIVE_S:
        return "running", f"replicated heartbeat {age_s:.0f} s old", None
    return "stalled", f"no replicated heartbeat for {age_s:.0f} s (limit {ALIVE_S:.0f} s)", _iso(heartbeat_ms)


def _run_said(row: dict[str, Any] | None, heartbeat_ms: int | None) -> tuple[str, str, str | None] | None:
    """What the flow's run said last (a flow_states row), unless a heartbeat crossed since."""
    if row is None or row["state"] not in (WAITING, FAILED):
        return None
    since_ms = _ms(row["since"])
    if heartbeat_ms is not None and since_ms <= heartbeat_ms:  # copying again since
        return None
    if row["state"] == FAILED:
        return "failed", f"the run failed: {_first_line(row['reason'])}", _iso(since_ms)
    return "waiting", f"waiting for {row['cluster']} since {_iso(since_ms)}: {row['reason']}", _iso(since_ms)


class ClusterAccess:
    """How the health of a flow reaches its clusters: an admin client per cluster, and which
    clusters are known not to answer (their calls are not tried). This default builds a client per
    call and knows of no unreachable cluster (``srm-control status``); the monitoring service
    (srm.service.monitor) keeps its clients and probes the clusters off the request path."""

    def admin(self, cluster: Cluster) -> Any:
        return clients.admin_client(cluster)

    def unreachable(self, alias: str) -> str | None:
        """Why ``alias`` is not tried ("unreachable since T: ..."), None to try it."""
        return None


@dataclass(frozen=True)
class Position:
    """A source partition of a flow: its end (last stable offset) and the flow's progress on the
    target (the next offset to copy)."""

    end: int
    next_offset: int

    @property
    def lag(self) -> int:
        return max(0, self.end - self.next_offset)


def flow_health(
    config: SrmConfig,
    flow: Flow,
    paused: bool | None = None,
    *,
    access: ClusterAccess | None = None,
    positions: dict[tuple[str, int], Position] | None = None,
) -> FlowHealth:
    """The flow's state and figures. ``positions``: its partitions' positions when the caller read
    them already (flow_positions)."""
    from srm.config.dag_ids import dag_id

    access = access or ClusterAccess()
    health = FlowHealth(flow.name, flow.source, flow.target)
    warehouse = Warehouse(config.storage.warehouse)
    failure = newest(warehouse.read(TASK_FAILURES, flow=flow.name), "failed_at")
    loss = newest(warehouse.read(DATA_LOSS, flow=flow.name), "detected_at")
    waiting = newest(warehouse.read(FLOW_STATES, flow=flow.name), "since")
    health.last_error = _error(failure, loss)
    replicate = dag_id(flow, "replicate")
    down = {alias: why for alias in (flow.source, flow.target) if (why := access.unreachable(alias))}
    try:
        if down:
            raise ClusterUnreachableError("; ".join(down.values()), cluster=next(iter(down)))
        target = config.cluster(flow.target)
        target_admin = access.admin(target)
        beat = freshness(target, flow, target_admin)
        state = assess(beat.now_ms, beat.newest_ms, paused, failure, replicate, waiting=waiting)
        health.state, health.reason, health.since = state
        health.heartbeat_age_s = None if beat.age_s is None else round(beat.age_s, 1)
        found = positions if positions is not None else flow_positions(config, flow, access)
        health.lag = topic_lag(found)
        checkpoint = newest_record_age(target, flow.policy.checkpoints_topic(flow.source), target_admin)
        health.checkpoint_age_s = None if checkpoint is None else round(checkpoint, 1)
    except SrmError as exc:
        health.reason = str(exc)
        said = _run_said(waiting, None)  # what the flow's latest run said, whatever the clusters do now
        if paused:
            health.state, health.reason = "paused", f"DAG {replicate} is paused in Airflow"
        elif failure and failure["dag_id"] == replicate:
            health.state, health.reason, health.since = assess(0, None, paused, failure, replicate)
        elif said is not None:  # the run's own words first: what it waits for, since when
            health.state, health.reason, health.since = said
            if down:
                health.reason += f" ({'; '.join(down.values())})"
        elif down:
            health.state = UNREACHABLE
    return health


def flow_positions(
    config: SrmConfig, flow: Flow, access: ClusterAccess | None = None
) -> dict[tuple[str, int], Position]:
    """Per source partition the flow replicates: the source's end and the flow's progress."""
    access = access or ClusterAccess()
    source, target = config.flow_clusters(flow)
    target_admin = access.admin(target)
    lists = read_lists(target, flow)["topics"]
    selector = TopicSelector(flow, lists.allow, lists.deny)
    source_admin = access.admin(source)
    counts = partition_counts(source_admin)
    keys = [(t, p) for t in sorted(counts) if selector.replicates(t) for p in range(counts[t])]
    ends = list_offsets(source_admin, keys, "latest")
    done = read_flow_progress(target, flow, keys, target_admin)
    return {k: Position(e, done[k].next_offset if k in done else 0) for k, e in ends.items()}


def flow_lag(config: SrmConfig, flow: Flow) -> dict[str, int]:
    """Records not yet copied, per source topic the flow replicates."""
    return topic_lag(flow_positions(config, flow))


def topic_lag(positions: dict[tuple[str, int], Position]) -> dict[str, int]:
    lag: dict[str, int] = {}
    for (topic, _), position in sorted(positions.items()):
        lag[topic] = lag.get(topic, 0) + position.lag
    return lag


def newest_record_age(cluster: Cluster, topic: str, admin: Any | None = None) -> float | None:
    """Seconds since the newest record of a one-partition internal topic was written (None: empty)."""
    admin = admin or clients.admin_client(cluster)
    if topic not in partition_counts(admin, include_internal=True):
        return None
    end = list_offsets(admin, [(topic, 0)], "latest")[(topic, 0)]
    if end == 0:
        return None
    consumer = clients.reader(cluster, "__srm.status")
    stamp = None
    try:
        for message in read_to_end(consumer, topic, 0, STATUS_READ_S, start=max(0, end - 10)):
            stamp = message.timestamp()[1]
    finally:
        consumer.close()
    return None if stamp is None else time.time() - stamp / 1000


def newest(rows: list[dict[str, Any]], column: str) -> dict[str, Any] | None:
    return max(rows, key=lambda r: r[column]) if rows else None


def _error(failure: dict[str, Any] | None, loss: dict[str, Any] | None) -> dict[str, Any] | None:
    found = []
    if failure:
        found.append(
            {
                "at": _iso(_ms(failure["failed_at"])),
                "message": f"{failure['dag_id']}.{failure['task_id']} failed: {failure['error']}",
                "dag_id": failure["dag_id"],
                "task_id": failure["task_id"],
                "run_id": failure["run_id"],
                "log_url": failure["log_url"] or None,
            }
        )
    if loss:
        text = (
            f"data loss: {loss['topic']}[{loss['partition']}] offsets {loss['first_offset']}.."
            f"{loss['end_offset'] - 1} ({loss['records']} records, {loss['reason']})"
        )
        found.append({"at": _iso(_ms(loss["detected_at"])), "message": text})
    return max(found, key=lambda e: str(e["at"])) if found else None


def _ms(value: datetime) -> int:
    return int(value.timestamp() * 1000)


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds")


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "failed"
