"""The monitoring service's picture of every flow, kept off the request path.

A request of the REST API or a Prometheus scrape never talks to Kafka: it reads the newest
:class:`Snapshot`, which a background thread (:class:`Monitor`) replaces every ``refresh_s``.
Each round
1. reads the configuration if its file changed (leniently: a broken flow is reported with its
   line, the others are served);
2. probes every cluster at once, each within PROBE_TIMEOUT_S: a cluster that does not answer is
   "unreachable since T" until it answers again, and no call of the round goes to it;
3. observes each flow in a thread of its own (state, lag and the age of the oldest record not
   copied per partition, the newest lease metrics and checkpoint latencies from the warehouse,
   and what the current leases copied so far from the copiers' statuses, srm.service.statuses).
   An observation still running at the round's end keeps the flow's previous figures, marked
   with their age; a flow is never observed twice at once.
4. renders the Prometheus exposition of the snapshot once (srm.service.exposition), so that a
   scrape costs a copy of bytes whatever the number of partitions.

The Kafka clients (an admin client per cluster) live as long as the monitor and are rebuilt when
a cluster's settings change, as does the consumer of each flow's statuses; the consumer that reads
the oldest records is closed after each read.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from srm import clients
from srm.config.loader import default_config_path, load_config_with_issues
from srm.config.model import Cluster, Flow, SrmConfig
from srm.errors import ConfigIssue, SrmError
from srm.health import ClusterAccess, FlowHealth, Position, flow_health, flow_positions
from srm.replication.status import LeaseStatus
from srm.service.statuses import StatusTail
from srm.warehouse import CHECKPOINT_METRICS, DATA_LOSS, METRICS, Warehouse, in_window

log = logging.getLogger(__name__)

REFRESH_S = 10.0  # until the configuration is read (then its monitoring.refresh.seconds)
PROBE_TIMEOUT_S = 5.0  # a cluster that returns no metadata within this is unreachable
OLDEST_READ_S = 5.0  # reading the oldest record not copied of each partition behind, per round
LEASE_WINDOW_S = 300.0  # the newest lease metrics of a partition are looked for this far back
CHECKPOINT_WINDOW_S = 600.0  # and the newest checkpoint latencies
LEASE_COLUMNS = [
    "topic",
    "partition",
    "target_topic",
    "records",
    "bytes",
    "transactions",
    "aborted",
    *(f"{m}_{k}_ms" for m in ("record_age", "latency") for k in ("min", "avg", "max")),
    "started_at",
    "finished_at",
]


@dataclass(frozen=True)
class ClusterState:
    alias: str
    reachable: bool
    since_ms: int  # when it entered this state
    checked_ms: int
    detail: str = ""  # why it is unreachable; never its bootstrap servers or settings

    def unreachable_reason(self) -> str | None:
        if self.reachable:
            return None
        return f"{self.alias} unreachable since {iso(self.since_ms)}: {self.detail}"


@dataclass(frozen=True)
class PartitionFigures:
    topic: str
    partition: int
    end: int
    next_offset: int
    lag: int
    oldest_ms: int | None  # the timestamp of the oldest record not copied yet (None: none, or not read)


@dataclass(frozen=True)
class Copied:
    """What the flow copied of one partition since the monitor started: the sums of its lease rows,
    and of the statuses of the leases whose rows have not come yet."""

    topic: str
    partition: int
    remote_topic: str
    records: int = 0
    bytes: int = 0
    transactions: int = 0
    aborted: int = 0  # transactions holding its records that were aborted (and copied again)


@dataclass(frozen=True)
class FlowView:
    flow: Flow
    health: FlowHealth
    partitions: tuple[PartitionFigures, ...] = ()
    leases: tuple[dict[str, Any], ...] = ()  # the newest replication_metrics row of each partition
    checkpoints: tuple[dict[str, Any], ...] = ()  # per group partition: newest, min, max, avg latency
    lost: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, records) lost, all time
    copied: tuple[Copied, ...] = ()
    observed_ms: int = 0
    note: str = ""  # why these figures are older than the snapshot

    def as_dict(self, now_ms: int) -> dict[str, Any]:
        out = self.health.as_dict()
        out["observed_at"] = iso(self.observed_ms) if self.observed_ms else None
        out["age_s"] = round((now_ms - self.observed_ms) / 1000, 1) if self.observed_ms else None
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class BrokenFlow:
    """A flow of the file that does not parse: its problems, by line (never the file's path)."""

    name: str
    problems: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"flow": self.name, "state": "invalid", "reason": "; ".join(self.problems)}


@dataclass(frozen=True)
class Snapshot:
    taken_ms: int
    config: SrmConfig | None = None
    flows: dict[str, FlowView] = field(default_factory=dict)
    clusters: dict[str, ClusterState] = field(default_factory=dict)
    broken: tuple[BrokenFlow, ...] = ()
    problem: str | None = None  # the file as a whole cannot be used
    exposition: bytes = b""


def issue_text(issue: ConfigIssue) -> str:
    """An issue as a reader of the API sees it: the file's name and line, not its path."""
    where = f"{Path(issue.file).name}:{issue.line}" if issue.line else Path(issue.file).name
    return f"{where}: {issue.key}: {issue.message}" if issue.key else f"{where}: {issue.message}"


class ConfigSource:
    """The configuration, read again only when its file changed (modification time and size)."""

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self._seen: tuple[int, int] | None = None
        self._loaded: tuple[SrmConfig | None, list[ConfigIssue]] = (None, [])
        self._lock = threading.Lock()

    def current(self) -> tuple[SrmConfig | None, list[ConfigIssue]]:
        path = self.path or default_config_path()
        try:
            stat = path.stat()
            seen: tuple[int, int] | None = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            seen = None
        with self._lock:
            if seen is None or seen != self._seen:
                self._loaded = load_config_with_issues(path)
                self._seen = seen
            return self._loaded


class MonitorAccess(ClusterAccess):
    """The monitor's clients and probe results, for srm.health."""

    def __init__(self, admins: dict[str, Any], states: dict[str, ClusterState]) -> None:
        self.admins = admins
        self.states = states

    def admin(self, cluster: Cluster) -> Any:
        return self.admins.get(cluster.alias) or clients.admin_client(cluster)

    def unreachable(self, alias: str) -> str | None:
        state = self.states.get(alias)
        return state.unreachable_reason() if state is not None else None


class Monitor:
    def __init__(
        self,
        source: ConfigSource,
        paused: Callable[[list[str]], dict[str, bool]] | None = None,
        *,
        refresh_s: float | None = None,
        render: Callable[[Snapshot], bytes] | None = None,
    ) -> None:
        self.source = source
        self.paused = paused
        self.fixed_refresh_s = refresh_s  # None: the configuration's monitoring.refresh.seconds
        self.refresh_s = refresh_s or REFRESH_S
        self.probe_timeout_s = PROBE_TIMEOUT_S
        self.render = render
        self._snapshot = Snapshot(taken_ms=0, problem="the monitor has not looked at the clusters yet")
        self._admins: dict[str, tuple[str, Any]] = {}  # alias -> (settings digest, admin client)
        self._probes: dict[str, futures.Future[None]] = {}
        self._observing: dict[str, futures.Future[FlowView]] = {}
        # Per flow (each observed by one thread at a time, so each its own dict): (topic, partition) ->
        # (the progress, the timestamp of the record there).
        self._oldest: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
        # Per flow and partition: the newest lease row counted (when it finished, when it started),
        # and the sums so far.
        self._counted: dict[str, dict[tuple[str, int], tuple[int, int, Copied]]] = {}
        self._statuses: dict[str, StatusTail] = {}  # per flow: the reader of its statuses
        self._counted_until: dict[str, int] = {}  # per flow: the newest lease row counted
        self._pool = futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="srm-monitor")
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._round = threading.Condition(self._lock)
        self.rounds = 0

    # --- lifecycle -------------------------------------------------------------------------------
    def start(self) -> Monitor:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="srm-monitor", daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.refresh_s + self.probe_timeout_s)
        self._pool.shutdown(wait=False, cancel_futures=True)
        for tail in self._statuses.values():
            tail.close()
        self._statuses.clear()
        self._admins.clear()  # confluent-kafka's admin clients close as they are released

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snapshot

    def wait_round(self, rounds: int = 1, timeout_s: float = 60.0) -> Snapshot:
        """The snapshot after ``rounds`` more rounds (tests, and a first request at start-up)."""
        deadline = time.monotonic() + timeout_s
        with self._round:
            target = self.rounds + rounds
            while self.rounds < target and time.monotonic() < deadline:
                self._round.wait(deadline - time.monotonic())
            return self._snapshot

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                snapshot = self.refresh()
            except Exception:  # a round that fails keeps the previous snapshot; the next one tries again
                log.exception("the monitor's round failed; the previous figures stay")
                snapshot = self.snapshot()
            with self._round:
                self._snapshot = snapshot
                self.rounds += 1
                self._round.notify_all()
            self._stop.wait(max(0.0, self.refresh_s - (time.monotonic() - started)))

    # --- one round -------------------------------------------------------------------------------
    def refresh(self) -> Snapshot:
        now = _now_ms()
        config, issues = self.source.current()
        whole = [i for i in issues if i.flow is None]
        if config is None or whole:
            problem = "; ".join(issue_text(i) for i in (whole or issues)) or "the configuration cannot be read"
            return Snapshot(taken_ms=now, problem=f"the replication configuration cannot be used: {problem}")
        broken: dict[str, list[str]] = {}
        for issue in issues:
            broken.setdefault(str(issue.flow), []).append(issue_text(issue))
        self.refresh_s = self.fixed_refresh_s or config.monitoring.refresh_seconds
        flows = list(config.enabled_flows())
        self._forget({f.name for f in flows})
        used = {alias for f in flows for alias in (f.source, f.target)}
        clusters = self._probe([config.cluster(a) for a in sorted(used)])
        access = MonitorAccess({a: self._admin_of(config.cluster(a)) for a in used}, clusters)
        paused = self._paused(flows)
        previous = self.snapshot().flows
        views: dict[str, FlowView] = {}
        for flow in flows:
            running = self._observing.get(flow.name)
            if running is None or running.done():
                running = self._pool.submit(self._observe, config, flow, paused.get(flow.name), access)
                self._observing[flow.name] = running
        deadline = time.monotonic() + max(1.0, self.refresh_s - self.probe_timeout_s)
        for flow in flows:
            running = self._observing[flow.name]
            try:
                views[flow.name] = running.result(timeout=max(0.0, deadline - time.monotonic()))
            except futures.TimeoutError:
                views[flow.name] = self._late(flow, previous.get(flow.name), clusters, paused.get(flow.name))
            except Exception as exc:  # an observation that failed: the flow shows why, the others go on
                log.warning("flow %s: observation failed: %s", flow.name, exc)
                views[flow.name] = FlowView(flow, _health(flow, "unknown", str(exc)), observed_ms=_now_ms())
        snapshot = Snapshot(
            taken_ms=now,
            config=config,
            flows=views,
            clusters=clusters,
            broken=tuple(BrokenFlow(n, tuple(p)) for n, p in sorted(broken.items())),
        )
        if self.render is not None:
            snapshot = replace(snapshot, exposition=self.render(snapshot))
        return snapshot

    def _forget(self, names: set[str]) -> None:
        """Drop what the monitor kept of flows the configuration no longer has (or has disabled)."""
        for kept in (self._oldest, self._counted, self._counted_until, self._observing):
            for name in set(kept) - names:
                del kept[name]
        for name in set(self._statuses) - names:
            self._statuses.pop(name).close()

    def _late(
        self, flow: Flow, before: FlowView | None, clusters: dict[str, ClusterState], paused: bool | None
    ) -> FlowView:
        """A flow whose observation is still running (a cluster stopped answering under it): its
        previous figures, marked with their age; unreachable now if one of its clusters is."""
        note = "figures from the last complete observation: the current one is still waiting for the clusters"
        down = [c.unreachable_reason() for a, c in clusters.items() if a in (flow.source, flow.target)]
        reason = "; ".join(r for r in down if r)
        if before is None:
            state = "paused" if paused else ("unreachable" if reason else "unknown")
            return FlowView(
                flow, _health(flow, state, reason or "observing the flow's clusters (no answer yet)"), note=note
            )
        health = before.health
        if reason and not paused and health.state not in ("failed", "paused", "waiting"):
            health = replace(health, state="unreachable", reason=reason, since=None)
        return replace(before, health=health, note=note)

    def _probe(self, clusters: list[Cluster]) -> dict[str, ClusterState]:
        before = self.snapshot().clusters
        for cluster in clusters:
            running = self._probes.get(cluster.alias)
            if running is None or running.done():
                self._probes[cluster.alias] = self._pool.submit(self._probe_one, cluster)
        deadline = time.monotonic() + self.probe_timeout_s + 1.0
        out: dict[str, ClusterState] = {}
        now = _now_ms()
        for cluster in clusters:
            detail = ""
            try:
                self._probes[cluster.alias].result(timeout=max(0.0, deadline - time.monotonic()))
            except futures.TimeoutError:
                detail = f"no metadata within {self.probe_timeout_s:.0f} s (a probe is still waiting)"
            except Exception as exc:
                detail = redact(str(exc), [cluster])
            reachable = not detail
            old = before.get(cluster.alias)
            since = old.since_ms if old is not None and old.reachable == reachable else now
            out[cluster.alias] = ClusterState(cluster.alias, reachable, since, now, detail)
        return out

    def _probe_one(self, cluster: Cluster) -> None:
        from confluent_kafka import KafkaException

        try:
            self._admin_of(cluster).list_topics(timeout=self.probe_timeout_s)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else exc
            text = error.str() if hasattr(error, "str") else str(error)
            raise SrmError(f"no metadata within {self.probe_timeout_s:g} s ({text})") from None

    def _admin_of(self, cluster: Cluster) -> Any:
        digest = clients.settings_digest(cluster)
        kept = self._admins.get(cluster.alias)
        if kept is None or kept[0] != digest:
            kept = (digest, clients.admin_client(cluster))
            self._admins[cluster.alias] = kept
        return kept[1]

    def _paused(self, flows: list[Flow]) -> dict[str, bool]:
        if self.paused is None or not flows:
            return {}
        from srm.airflow.defaults import dag_id

        dags = {dag_id(f, "replicate"): f.name for f in flows}
        try:
            found = self.paused(list(dags))
        except Exception as exc:  # Airflow's database not answering: the flows' states go on without it
            log.warning("cannot read which DAGs are paused: %s", exc)
            return {}
        return {name: found[d] for d, name in dags.items() if d in found}

    # --- one flow --------------------------------------------------------------------------------
    def _observe(self, config: SrmConfig, flow: Flow, paused: bool | None, access: MonitorAccess) -> FlowView:
        positions: dict[tuple[str, int], Position] | None = None
        down = access.unreachable(flow.source) or access.unreachable(flow.target)
        if not down:
            try:
                positions = flow_positions(config, flow, access)
            except SrmError as exc:
                log.info("flow %s: positions not read: %s", flow.name, exc)
        health = flow_health(config, flow, paused, access=access, positions=positions)
        partitions: tuple[PartitionFigures, ...] = ()
        if positions is not None:
            oldest = self._oldest_records(config.cluster(flow.source), flow, positions)
            partitions = tuple(
                PartitionFigures(t, p, pos.end, pos.next_offset, pos.lag, oldest.get((t, p)))
                for (t, p), pos in sorted(positions.items())
            )
        warehouse = Warehouse(config.storage.warehouse)
        # One scan of the lease rows serves both the newest lease per partition and the counts.
        end = _now_ms() + 1
        start = min(self._counted_until.get(flow.name, end), end) - int(LEASE_WINDOW_S * 1000)
        scanned = warehouse.scan(METRICS, in_window(flow.name, "finished_at", start, end), LEASE_COLUMNS)
        rows = [] if scanned is None else scanned.to_pylist()
        copied, statuses = self._count(flow, rows, positions, None if down else config.cluster(flow.target))
        return FlowView(
            flow,
            health,
            partitions,
            leases=tuple(_newest_leases([*rows, *(s.row() for s in statuses)], end - int(LEASE_WINDOW_S * 1000))),
            checkpoints=tuple(_checkpoint_latencies(warehouse, flow)),
            lost=tuple(_losses(warehouse, flow)),
            copied=tuple(copied),
            observed_ms=_now_ms(),
        )

    def _oldest_records(
        self, source: Cluster, flow: Flow, positions: dict[tuple[str, int], Position]
    ) -> dict[tuple[str, int], int]:
        """The timestamp of the first record not copied of each partition behind (its age is what a
        failover now would lose). A partition whose progress did not move keeps the timestamp read
        before; the others are read within OLDEST_READ_S, the rest in a later round."""
        from confluent_kafka import TopicPartition

        out: dict[tuple[str, int], int] = {}
        wanted: dict[tuple[str, int], int] = {}
        known = self._oldest.setdefault(flow.name, {})
        for gone in set(known) - set(positions):
            del known[gone]
        for key, position in positions.items():
            if position.lag <= 0:
                known.pop(key, None)
                continue
            kept = known.get(key)
            if kept is not None and kept[0] == position.next_offset:
                out[key] = kept[1]
            else:
                wanted[key] = position.next_offset
        if not wanted:
            return out
        consumer = clients.reader(source, "__srm.monitor", **{"enable.partition.eof": False})
        try:
            consumer.assign([TopicPartition(t, p, o) for (t, p), o in wanted.items()])
            deadline = time.monotonic() + OLDEST_READ_S
            while wanted and time.monotonic() < deadline:
                for message in consumer.consume(500, 0.2):
                    key = (message.topic(), message.partition())
                    if message.error() is not None or key not in wanted:
                        continue
                    known[key] = (wanted.pop(key), message.timestamp()[1])
                    out[key] = message.timestamp()[1]
                    consumer.pause([TopicPartition(*key)])
        finally:
            consumer.close()
        return out

    def _count(
        self,
        flow: Flow,
        rows: list[dict[str, Any]],
        positions: dict[tuple[str, int], Position] | None,
        target: Cluster | None,
    ) -> tuple[list[Copied], list[LeaseStatus]]:
        """Records, bytes and transactions copied per partition since the monitor started (as MM2's
        counts since its task started): the sum of the lease rows it has seen, and of the statuses
        of the leases whose rows have not come yet (read now unless ``target`` is None: it does not
        answer). ``rows``: the lease rows from LEASE_WINDOW_S before the newest counted (a lease's
        rows are appended when the lease ends); partitions the flow no longer has are dropped.
        Also the statuses counted."""
        counted = self._counted.setdefault(flow.name, {})
        for row in rows:
            key = (row["topic"], row["partition"])
            finished = int(row["finished_at"].timestamp() * 1000)
            started = int(row["started_at"].timestamp() * 1000)
            fresh = Copied(row["topic"], row["partition"], row["target_topic"])
            seen, newest, before = counted.get(key, (0, -1, fresh))
            if finished <= seen:
                continue
            counted[key] = (
                finished,
                max(newest, started),
                replace(
                    before,
                    remote_topic=row["target_topic"] or before.remote_topic,
                    records=before.records + row["records"],
                    bytes=before.bytes + row["bytes"],
                    transactions=before.transactions + row["transactions"],
                    aborted=before.aborted + (row["aborted"] or 0),  # null in rows written before the column
                ),
            )
            self._counted_until[flow.name] = max(self._counted_until.get(flow.name, 0), finished)
        tail = self._status_tail(flow, target)
        if positions is not None:
            for gone in set(counted) - set(positions):
                del counted[gone]
            if tail is not None:
                tail.forget(set(positions))
        if tail is not None and target is not None:
            tail.read()
        statuses = [] if tail is None else tail.current({key: started for key, (_, started, _) in counted.items()})
        totals = {key: copied for key, (_, _, copied) in counted.items()}
        for status in statuses:
            key = (status.topic, status.partition)
            before = totals.get(key, Copied(status.topic, status.partition, status.target_topic))
            totals[key] = replace(
                before,
                records=before.records + status.records,
                bytes=before.bytes + status.byte_count,
                transactions=before.transactions + status.transactions,
                aborted=before.aborted + status.aborted,
            )
        return [totals[key] for key in sorted(totals)], statuses

    def _status_tail(self, flow: Flow, target: Cluster | None) -> StatusTail | None:
        """The reader of ``flow``'s statuses, built again when the target's settings changed."""
        tail = self._statuses.get(flow.name)
        if target is None:
            return tail
        if tail is not None and tail.digest != clients.settings_digest(target):
            tail.close()
            tail = None
        if tail is None:
            tail = self._statuses[flow.name] = StatusTail(target, flow, LEASE_WINDOW_S)
        return tail


def _newest_leases(rows: list[dict[str, Any]], since_ms: int) -> list[dict[str, Any]]:
    """The newest lease row of each partition among ``rows`` finished at or after ``since_ms``."""
    newest: dict[tuple[str, int], dict[str, Any]] = {}
    for row in rows:
        if row["finished_at"].timestamp() * 1000 < since_ms:
            continue
        key = (row["topic"], row["partition"])
        if key not in newest or row["finished_at"] > newest[key]["finished_at"]:
            newest[key] = row
    return [newest[k] for k in sorted(newest)]


def _checkpoint_latencies(warehouse: Warehouse, flow: Flow) -> list[dict[str, Any]]:
    end = _now_ms() + 1
    scanned = warehouse.scan(
        CHECKPOINT_METRICS,
        in_window(flow.name, "written_at", end - int(CHECKPOINT_WINDOW_S * 1000), end),
        ["direction", "group", "topic", "partition", "latency_ms", "written_at"],
    )
    found: dict[tuple[str, str, int], list[tuple[Any, float]]] = {}
    for row in [] if scanned is None else scanned.to_pylist():
        if row["direction"] != "forward" or row["latency_ms"] is None:
            continue
        found.setdefault((row["group"], row["topic"], row["partition"]), []).append(
            (row["written_at"], row["latency_ms"])
        )
    out = []
    for (group, topic, partition), values in sorted(found.items()):
        latencies = [v for _, v in values]
        out.append(
            {
                "group": group,
                "topic": topic,
                "partition": partition,
                "latency_ms": max(values)[1],
                "min": min(latencies),
                "max": max(latencies),
                "avg": sum(latencies) / len(latencies),
            }
        )
    return out


def _losses(warehouse: Warehouse, flow: Flow) -> list[tuple[str, int, int]]:
    import pyarrow.compute as pc

    scanned = warehouse.scan(DATA_LOSS, pc.field("flow") == flow.name, ["topic", "partition", "records"])
    sums: dict[tuple[str, int], int] = {}
    for row in [] if scanned is None else scanned.to_pylist():
        key = (row["topic"], row["partition"])
        sums[key] = sums.get(key, 0) + row["records"]
    return [(t, p, n) for (t, p), n in sorted(sums.items())]


def _health(flow: Flow, state: str, reason: str) -> FlowHealth:
    return FlowHealth(flow.name, flow.source, flow.target, state=state, reason=reason)


def redact(text: str, clusters: Any, file: str | None = None) -> str:
    """``text`` as the API may show it: without the clusters' bootstrap servers and the
    configuration file's path (its name stays)."""
    for cluster in clusters:
        servers = [s.strip() for s in (cluster.bootstrap_servers or "").split(",") if s.strip()]
        if cluster.bootstrap_servers:
            text = text.replace(f" ({cluster.bootstrap_servers})", "")
        for server in servers:
            text = text.replace(server, "<broker>")
    if file:
        text = text.replace(str(Path(file).resolve()), Path(file).name).replace(file, Path(file).name)
    return text


def _now_ms() -> int:
    return int(time.time() * 1000)


def iso(ms: int) -> str:
    """``ms`` since the epoch as ISO 8601 UTC to the second."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ms / 1000))
