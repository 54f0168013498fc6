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
from dataclasses import replace
from pathlib import Path
from typing import Any

from srm.config.loader import default_config_path, load_config_with_issues
from srm.config.model import Cluster, Flow, SrmConfig
from srm.errors import ConfigIssue, SrmError
from srm.kafka import clients
from srm.operations.health import ClusterAccess, FlowHealth, Position, flow_health, flow_positions
from srm.service.copied import FlowCopies, checkpoint_latencies, losses
from srm.service.snapshot import (
    BrokenFlow,
    ClusterState,
    FlowView,
    PartitionFigures,
    Snapshot,
    issue_text,
    now_ms,
    redact,
)
from srm.storage.warehouse import Warehouse

log = logging.getLogger(__name__)

REFRESH_S = 10.0  # until the configuration is read (then its monitoring.refresh.seconds)
PROBE_TIMEOUT_S = 5.0  # a cluster that returns no metadata within this is unreachable
OLDEST_READ_S = 5.0  # reading the oldest record not copied of each partition behind, per round


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
    """The monitor's clients and probe results, for srm.operations.health."""

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
        self._copies: dict[str, FlowCopies] = {}  # per flow: what it copied (srm.service.copied)
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
        for copies in self._copies.values():
            copies.close()
        self._copies.clear()
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
        now = now_ms()
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
                views[flow.name] = FlowView(flow, _health(flow, "unknown", str(exc)), observed_ms=now_ms())
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
        for kept in (self._oldest, self._observing):
            for name in set(kept) - names:
                del kept[name]
        for name in set(self._copies) - names:
            self._copies.pop(name).close()

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
        now = now_ms()
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
        from srm.config.dag_ids import dag_id

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
        copies = self._copies.setdefault(flow.name, FlowCopies(flow))
        copied, leases = copies.observe(warehouse, positions, None if down else config.cluster(flow.target))
        return FlowView(
            flow,
            health,
            partitions,
            leases=tuple(leases),
            checkpoints=tuple(checkpoint_latencies(warehouse, flow)),
            lost=tuple(losses(warehouse, flow)),
            copied=tuple(copied),
            observed_ms=now_ms(),
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


def _health(flow: Flow, state: str, reason: str) -> FlowHealth:
    return FlowHealth(flow.name, flow.source, flow.target, state=state, reason=reason)
