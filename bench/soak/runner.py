"""The soak itself: clusters, flow, load, checker, schedules, and the checks at the end."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench.soak import groups
from bench.soak.checker import Checker, verdict
from bench.soak.faults import Fault, Faults, schedule
from bench.soak.history import history_pruned, history_span_min, log_starts, settled_rows
from bench.soak.job import Job, PassResult, checkpoint_pass
from bench.soak.load import Load
from bench.soak.samples import READINGS_PER_MINUTE, Readings, Sample, folder_mb, latency, timed, tree_mb, tree_rss_mb
from srm.config import load_config
from srm.devenv.local import LocalClusters
from srm.kafka import clients
from srm.kafka.internal_topics import history_topic_name
from srm.kafka.topics import ensure_topic
from srm.maintenance.compaction import maintain
from srm.maintenance.metrics_rollup import roll_up
from srm.offsets.api import translate
from srm.offsets.retention import HistoryPruner
from srm.storage.warehouse import SYNC_HISTORY, Warehouse
from tests.conftest import free_ports

log = logging.getLogger("bench.soak")
SOURCE, TARGET = "soak-src", "soak-dst"
CATCH_UP_S = 300.0  # after the load stops, how long the copy may take to deliver the rest
SEGMENT_MS = 60_000
SINGLE_BROKER = (
    "replication.factor",
    "checkpoints.topic.replication.factor",
    "heartbeats.topic.replication.factor",
    "offset-syncs.topic.replication.factor",
)  # the load topics' segments: retention deletes whole segments


@dataclass(frozen=True)
class Options:
    minutes: float
    rate: int = 5000
    topics: int = 16
    partitions: int = 64
    groups: int = 200
    retention_minutes: float = 30.0
    faults: int = 24
    kinds: tuple[str, ...] = ()
    tasks: int = 2
    warmup_s: float = 300.0
    prune_s: float = 300.0
    checkpoints_s: float = 60.0
    linger_ms: int | None = None  # the flow's transaction.linger.ms (None: the flow's default)
    interval_ms: int | None = None  # the flow's transaction.interval.ms (None: the flow's default)


@dataclass
class Outcome:
    records: int = 0
    lost: int = 0
    duplicated: int = 0
    faults: list[Fault] = field(default_factory=list)
    history_pruned: bool = False
    failover: dict[str, Any] = field(default_factory=dict)
    passes: list[PassResult] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    job_starts: int = 0
    job_exits: list[tuple[float, int]] = field(default_factory=list)
    sent: int = 0
    options: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        out["faults"] = [asdict(f) for f in self.faults]
        return out


class Soak:
    def __init__(self, options: Options, workdir: Path) -> None:
        self.options = options
        self.workdir = workdir
        self.config_path = workdir / "soak.yaml"
        self.config_path.write_text(yaml.safe_dump(self._config(), sort_keys=False))
        self.config = load_config(self.config_path)
        self.flow = self.config.flow(SOURCE, TARGET)
        self.clusters = LocalClusters(self.config.clusters, workdir)
        self.brokers = self.clusters.members
        self.topics: dict[str, int] = {}
        self.born: dict[tuple[str, int], float] = {}  # each source partition: when a sample first saw it
        self.stopping = threading.Event()
        self.outcome = Outcome(options=asdict(options))
        self.started = 0.0
        self.last_pass: PassResult | None = None
        self.last_translate_s: float | None = None
        self.readings = Readings()

    def _config(self) -> dict[str, Any]:
        p = free_ports(4)
        local = {"server": {"log.retention.check.interval.ms": 10_000}}
        return {
            "defaults": {
                k: 1
                for k in (
                    "replication.factor",
                    "checkpoints.topic.replication.factor",
                    "heartbeats.topic.replication.factor",
                    "offset-syncs.topic.replication.factor",
                )
            },
            "clusters": {
                SOURCE: {"bootstrap.servers": f"127.0.0.1:{p[0]}", "local": {"controller.port": p[1], **local}},
                TARGET: {"bootstrap.servers": f"127.0.0.1:{p[2]}", "local": {"controller.port": p[3], **local}},
            },
            "flows": [
                {
                    "source": SOURCE,
                    "target": TARGET,
                    "topics": ["soak-.*"],
                    "tasks.max": self.options.tasks,
                    "emit.checkpoints.interval.seconds": int(self.options.checkpoints_s),
                    **{
                        name: value
                        for name, value in (
                            ("transaction.linger.ms", self.options.linger_ms),
                            ("transaction.interval.ms", self.options.interval_ms),
                        )
                        if value is not None
                    },
                }
            ],
            "storage": {"warehouse": str(self.workdir / "warehouse"), "plan_logs": str(self.workdir / "plan-logs")},
        }

    # --- helpers for the faults ---------------------------------------------------------------
    @property
    def source(self) -> Any:
        return self.config.cluster(SOURCE)

    @property
    def target(self) -> Any:
        return self.config.cluster(TARGET)

    @property
    def source_admin(self) -> Any:
        return clients.admin_client(self.source)

    def srm_control(self) -> list[str]:
        return [str(Path(sys.executable).with_name("srm-control")), "--config", str(self.config_path)]

    def flow_args(self) -> list[str]:
        return ["--source", SOURCE, "--target", TARGET]

    def create_topic(self, topic: str, partitions: int) -> None:
        config = {"retention.ms": str(int(self.options.retention_minutes * 60_000)), "segment.ms": str(SEGMENT_MS)}
        ensure_topic(self.source_admin, topic, partitions, 1, config)
        self.topics[topic] = partitions

    def remote(self) -> dict[str, str]:
        return {self.flow.policy.format_remote_topic(SOURCE, t): t for t in list(self.topics)}

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    # --- the run ------------------------------------------------------------------------------
    def run(self) -> Outcome:
        """The whole soak; the clusters and the job are stopped whatever happens."""
        self.clusters.up()
        try:
            self._run()
        finally:
            self.stopping.set()
            job = getattr(self, "job", None)
            if job is not None:
                job.stop()
            self.clusters.down()
        return self.outcome

    def _run(self) -> None:
        env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        per_topic, extra = divmod(self.options.partitions, self.options.topics)
        for i in range(self.options.topics):
            self.create_topic(f"soak-{i:02d}", per_topic + (1 if i < extra else 0))
        command = [*self.srm_control(), "run", "replicate", *self.flow_args(), "--mode", "continuous"]
        self.job = Job(command, self.workdir / "replicate.log", env)
        self.load = Load(self.source, self.options.rate, lambda: dict(self.topics))
        self.checker = Checker(self.target, self.remote)
        self.started = time.monotonic()
        for worker in (self.job, self.load, self.checker):
            worker.start()
        background = [
            threading.Thread(target=fn, daemon=True, name=fn.__name__)
            for fn in (self._faults, self._checkpoints, self._prunes, self._translations)
        ]
        for thread in background:
            thread.start()
        try:
            self._sample_until(self.options.minutes * 60)
        finally:
            self.stopping.set()
            for thread in background:
                thread.join(300)
        self._finish()

    def _sample_until(self, end_s: float) -> None:
        group_names = groups.names(self.options.groups)
        next_minute = 60.0
        every = 60.0 / READINGS_PER_MINUTE
        next_reading = next_minute - 60.0 + every / 2
        while self.elapsed() < end_s:
            time.sleep(min(1.0, max(0.0, min(next_minute, next_reading) - self.elapsed())))
            for part, what in ((self.load, "load"), (self.checker, "checker")):
                if part.error is not None:
                    raise RuntimeError(f"the soak's {what} stopped: {part.error!r}")
            if self.elapsed() >= next_reading:
                self.readings.take(self._trees())
                next_reading += every
            if self.elapsed() < next_minute:
                continue
            self._commit_groups(group_names)
            self.outcome.samples.append(self._sample(next_minute))
            log.info("soak minute %.0f: %s", next_minute / 60, json.dumps(self.outcome.samples[-1].row()))
            next_minute += 60.0

    def _commit_groups(self, names: list[str]) -> None:
        partitions = [(t, p) for t, n in sorted(self.topics.items()) for p in range(n)]
        per_partition = self.options.rate / max(1, len(partitions))
        try:
            groups.commit_positions(self.source, names, partitions, per_partition)
        except Exception as exc:  # the source is being restarted: the next minute commits
            log.warning("committing the groups' positions failed: %s", exc)

    def _trees(self) -> dict[str, int | None]:
        return {"job": self.job.pid(), **{f"broker{i}": b.pid() for i, b in enumerate(self.brokers)}}

    def _sample(self, at_s: float) -> Sample:
        """The minute's sample; the RSS figures are the medians of the minute's readings."""
        job_rss, job_pss, job_processes = tree_mb(self.job.pid())
        job_rss = self.readings.median("job", job_rss)
        brokers = [self.readings.median(f"broker{i}", tree_rss_mb(b.pid())) for i, b in enumerate(self.brokers)]
        values = self.checker.latencies_before(int(time.time() // 60))  # every complete minute not taken
        p50, p99 = latency(values)
        warehouse = Warehouse(self.config.storage.warehouse)
        try:
            rows = warehouse.scan(SYNC_HISTORY, None, ["topic", "partition", "committed_at"])
        except Exception as exc:  # a file the prune's vacuum deleted under the scan: 0 this minute
            log.warning("counting the history's rows failed: %s", exc)
            rows = None
        settled = self._settled(at_s)
        topic_dir = self.brokers[1].data / f"{history_topic_name(self.flow)}-0"
        last = self.last_pass
        return Sample(
            minute=round(at_s / 60, 2),
            job_rss_mb=job_rss,
            job_pss_mb=job_pss,
            source_broker_rss_mb=brokers[0],
            target_broker_rss_mb=brokers[1],
            history_topic_mb=folder_mb(topic_dir, "*.log"),  # indexes are preallocated
            history_table_mb=folder_mb(Path(warehouse.path(SYNC_HISTORY))),
            history_rows=0 if rows is None else rows.num_rows,
            checkpoint_pass_s=None if last is None else last.seconds,
            checkpoint_pass_cpu_s=None if last is None else last.cpu_s,
            checkpoint_peak_pss_mb=None if last is None else last.peak_pss_mb,
            checkpoint_positions=None if last is None else last.positions,
            translate_s=self.last_translate_s,
            p50_ms=p50,
            p99_ms=p99,
            records=len(values),
            job_processes=job_processes,
            source_partitions=sum(self.topics.values()),
            settled_partitions=len(settled),
            settled_rows=None if rows is None else settled_rows(rows, settled),
            history_span_min=None if rows is None else history_span_min(rows, settled),
        )

    def _settled(self, at_s: float) -> set[tuple[str, int]]:
        """The source partitions that have lived longer than the source's retention and a prune:
        their history is as long as it gets (a partition a fault added fills up until then)."""
        for topic, count in list(self.topics.items()):
            for partition in range(count):
                self.born.setdefault((topic, partition), at_s if self.outcome.samples else 0.0)
        full = self.options.retention_minutes * 60 + self.options.prune_s
        return {key for key, born in self.born.items() if at_s - born >= full}

    # --- background schedules -----------------------------------------------------------------
    def _faults(self) -> None:
        faults = Faults(self)
        kinds = self.options.kinds or tuple(faults_kinds())
        for at, kind in schedule(self.options.minutes, self.options.faults, kinds, self.options.warmup_s):
            if self.stopping.wait(max(0.0, at - self.elapsed())):
                return
            fault = Fault(kind, round(self.elapsed(), 1))
            try:
                fault.detail = faults.apply(kind)
            except Exception as exc:
                fault.detail = f"failed: {exc}"
            fault.duration_s = round(self.elapsed() - fault.at_s, 1)
            log.info("soak fault %s at %.0f s (%.1f s): %s", kind, fault.at_s, fault.duration_s, fault.detail)
            self.outcome.faults.append(fault)
            threading.Thread(target=self._recovery, args=(fault,), daemon=True).start()

    def _recovery(self, fault: Fault) -> None:
        ended_ms = time.time() * 1000
        done, arrival = self.checker.watch(ended_ms)
        if done.wait(CATCH_UP_S):
            fault.recovered_s = round((arrival[0] - ended_ms) / 1000, 1)

    def _checkpoints(self) -> None:
        env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
        command = [*self.srm_control(), "run", "checkpoints", *self.flow_args()]
        while not self.stopping.wait(self.options.checkpoints_s):
            result = checkpoint_pass(command, self.workdir / "checkpoints.log", env, round(self.elapsed(), 1))
            self.outcome.passes.append(result)
            if result.exit_code == 0:
                self.last_pass = result

    def _translations(self) -> None:
        """A group translated live every minute (what ``srm-control translate --live`` does), timed
        here rather than in the sampler, which must not wait for it."""
        group = groups.names(1)[0]
        while not self.stopping.wait(60.0):
            self.last_translate_s = timed(
                lambda: translate(self.config, self.flow, "forward", groups=[group], live=True)
            )

    def _prunes(self) -> None:
        while not self.stopping.wait(self.options.prune_s):
            self._prune()

    def _prune(self) -> None:
        """The maintenance DAG's warehouse steps: the history's prune, the metrics rollup and the
        tables' compaction (each table at most once an hour)."""
        try:
            HistoryPruner(load_config(self.config_path), self.flow).prune()
        except Exception as exc:  # a broker is being restarted: the next prune
            log.warning("pruning the sync history failed: %s", exc)
        try:
            warehouse = Warehouse(self.config.storage.warehouse)
            roll_up(warehouse, self.flow)
            maintain(warehouse)
        except Exception as exc:  # as a failed maintenance task: the next run does it
            log.warning("the metrics' rollup or compaction failed: %s", exc)

    # --- the end ------------------------------------------------------------------------------
    def _finish(self) -> None:
        self.load.stop.set()
        self.load.join(180)
        deadline = time.monotonic() + CATCH_UP_S
        delivered = self.load.delivered()
        while not self.checker.caught_up(delivered) and time.monotonic() < deadline:
            time.sleep(1.0)
        self.outcome.sent = self.load.sent
        self.outcome.__dict__.update(verdict(self.checker.snapshot(), delivered, self.load.lost_on_the_way()))
        # The log starts as the prune meets them: the source's retention goes on deleting a segment
        # a minute per partition meanwhile, so starts read after the prune are ahead of it.
        warehouse = Warehouse(self.config.storage.warehouse)
        starts = log_starts(warehouse, self.flow.name, self.source_admin)
        self._prune()
        self.outcome.history_pruned = history_pruned(warehouse, self.flow.name, starts)
        self.outcome.failover = self._failover()
        self.job.stop()
        self.checker.stop.set()
        self.checker.join(30)
        self.outcome.job_starts, self.outcome.job_exits = self.job.starts, self.job.exits

    def _failover(self) -> dict[str, Any]:
        command = [
            *self.srm_control(),
            "failover",
            *self.flow_args(),
            "--group",
            f"{groups.PREFIX}.*",
            "--planned",
            "--apply",
        ]
        began = time.monotonic()
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=900)
        took = round(time.monotonic() - began, 1)
        if done.returncode:
            return {"error": done.stderr[-2000:] or done.stdout[-2000:], "seconds": took}
        names = groups.names(self.options.groups)
        mapping = {t: self.flow.policy.format_remote_topic(SOURCE, t) for t in self.topics}
        return {**groups.check_failover(self.source, self.target, names, mapping), "seconds": took}


def faults_kinds() -> tuple[str, ...]:
    from bench.soak.faults import KINDS

    return KINDS
