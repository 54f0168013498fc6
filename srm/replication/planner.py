"""Planning micro-batches (driver side): which source partitions to copy, up to which offset.

Runs in the driver, in the thread of the flow's run loop (:mod:`.run_loop`). Each call re-discovers the
source's topics through the flow's predicate, so new topics and partitions and edited
allow/deny lists (the YAML's and srm-control's) take effect at the next trigger; the
configuration file is re-read when it changes. Ends are last stable offsets (read_committed).
Where a partition starts the first time: the target's committed progress if there is any, else
the flow's ``start`` position for partitions that exist when the flow starts, and the earliest
offset for partitions that appear later (everything in them is new).

The target's progress is a consumer-group offset, which the target cluster deletes after
``offsets.retention.minutes`` without a commit (a flow stopped for longer, a partition idle
while an old job ran). Where it is missing for a partition the flow has copied before, the plan
resumes from the progress the flow's sync history recorded in the same transactions, so a
restart never copies a record twice.

In continuous mode every plan is a *lease* (see :mod:`srm.replication.resident`): it names every
partition of the flow, with the position each one resumes from, and a lease number.
"""

from __future__ import annotations

import logging
import os
from concurrent import futures
from datetime import datetime

from srm.config import load_config
from srm.config.model import Flow, SrmConfig
from srm.errors import ClusterUnreachableError, InvariantError
from srm.kafka import clients
from srm.kafka.control_lists import ControlReader
from srm.kafka.partitions import list_offsets, offsets_for_time
from srm.kafka.topics import partition_counts, topic_ids
from srm.replication import offsets as plan
from srm.replication.job import CopyRange
from srm.replication.progress import read_flow_progress
from srm.replication.selector import TopicSelector

log = logging.getLogger(__name__)
CLOSE_WAIT_S = 60.0  # close(): for a snapshot taken ahead that is still asking (a cluster not answering)


class Planner:
    def __init__(self, config_path: str, source: str, target: str, mode: str = "available-now") -> None:
        self.mode = mode
        self.config_path = config_path
        self.source_alias, self.target_alias = source, target
        self._mtime = 0.0
        self.unanswered = ""  # continuous mode: why the last plan could not be made (a cluster did not answer)
        self.unanswered_cluster = source  # which one (ClusterUnreachableError.cluster)
        self.control: ControlReader | None = None
        self.config: SrmConfig
        self.flow: Flow
        self.selector: TopicSelector
        self._load()
        self.settings_watch = clients.SettingsWatch(self.config.cluster(source), self.config.cluster(target))
        self.source_admin = clients.settled(clients.admin_client(self.config.cluster(source)))
        self.target_admin = clients.settled(clients.admin_client(self.config.cluster(target)))
        self._unanswered: set[str] = set()  # aliases whose client got no answer at the last plan
        self._ahead = futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="srm-plan-ahead")
        self._early: futures.Future[tuple[plan.Positions, dict[str, str]]] | None = None

    def _load(self) -> None:
        mtime = os.stat(self.config_path).st_mtime
        if mtime == self._mtime:
            return
        try:
            config = load_config(self.config_path, strict=True)
            flow = config.flow(self.source_alias, self.target_alias)
        except Exception as exc:
            if self._mtime == 0.0:
                raise
            log.error("configuration %s changed but is invalid; keeping the previous one: %s", self.config_path, exc)
            self._mtime = mtime
            return
        self.config, self.flow, self._mtime = config, flow, mtime
        if self.control is None or self.control.cluster != config.cluster(self.target_alias):
            if self.control is not None:
                self.control.close()
            self.control = ControlReader(config.cluster(self.target_alias))
            self.control.poll()
        self._select()

    def _select(self) -> None:
        """The topic predicate: the YAML's lists plus srm-control's (srm-control.internal)."""
        if self.control is None:
            raise InvariantError(f"planner of {self.flow.name}: the srm-control lists are read before they were loaded")
        lists = self.control.lists(self.flow, "topics")
        self.selector = TopicSelector(self.flow, lists.allow, lists.deny)

    # --- what exists ---------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """Replicated source topics and their partition counts."""
        self._load()
        if self.control is None:
            raise InvariantError(f"planner of {self.flow.name}: the srm-control lists are read before they were loaded")
        if self.control.poll():
            self._select()
            lists = self.control.lists(self.flow, "topics")
            log.info("srm-control lists of %s changed: allow %s, deny %s", self.flow.name, lists.allow, lists.deny)
        counts = partition_counts(self.source_admin, include_internal=True)
        return {t: n for t, n in sorted(counts.items()) if self.selector.replicates(t)}

    def snapshot_ahead(self) -> None:
        """Continuous mode, while a lease ends early (its copiers commit, the job returns): take the
        next plan's snapshot meanwhile, in a thread of its own; the next :meth:`latest` uses it.
        The run loop's thread makes no other call of the planner until then."""
        if self._early is None:
            self._early = self._ahead.submit(self.snapshot)

    def _snapshot_now(self) -> tuple[plan.Positions, dict[str, str]]:
        """The snapshot taken ahead, if one was (asked again if it failed), else a new one."""
        early, self._early = self._early, None
        if early is not None:
            try:
                return early.result()
            except Exception as exc:  # asked again below, which raises as the snapshot would have
                log.info("flow %s: the snapshot taken ahead failed (%s); asking again", self.flow.name, exc)
        return self.snapshot()

    def snapshot(self) -> tuple[plan.Positions, dict[str, str]]:
        """The replicated partitions' ends and their topics' ids. A partition the source no longer
        (or not yet) knows when asked, listed though it was a moment before, is left out: a topic
        deleted meanwhile is not in the plan, a partition just added joins the next one."""
        self._refresh_clients()
        topics = self.topics()
        partitions = [(t, p) for t, n in topics.items() for p in range(n)]
        ends = list_offsets(self.source_admin, partitions, "latest", gone_ok=True)
        ids = topic_ids(self.source_admin, list(topics), gone_ok=True)
        ends = {tp: end for tp, end in ends.items() if tp[0] in ids}
        left_out = [tp for tp in partitions if tp not in ends]
        if left_out:
            shown = ", ".join(f"{t}[{p}]" for t, p in left_out[:5]) + (", ..." if len(left_out) > 5 else "")
            log.info(
                "flow %s: %d partition(s) unknown to %s while planning (deleted, or not served yet): %s",
                *(self.flow.name, len(left_out), self.source_alias, shown),
            )
        planned = {t for t, _ in ends}
        return ends, {t: i for t, i in ids.items() if t in planned}

    def _refresh_clients(self) -> None:
        """Clients of a cluster whose client settings resolve differently now, or that got no
        answer at the last plan, are built again."""
        source, target = self.config.cluster(self.source_alias), self.config.cluster(self.target_alias)
        unanswered, self._unanswered = self._unanswered, set()
        changed = self.settings_watch.changed(source, target)
        if source.alias in unanswered or source.alias in changed:
            self.source_admin = clients.settled(clients.admin_client(source))
        if target.alias in unanswered or target.alias in changed:
            self.target_admin = clients.settled(clients.admin_client(target))
        if not changed:
            return
        if self.control is not None and target.alias in changed:
            control = ControlReader(target)
            control.poll()  # may fail (the target away): the current reader stays, tried again next time
            self.control.close()
            self.control = control
            self._select()
        self.settings_watch.accept()

    # --- plans --------------------------------------------------------------------------------
    def initial(self) -> plan.Offsets:
        """Where a run without a plan log starts: progress on the target, else ``start``."""
        ends, ids = self.snapshot()
        resume = self.resume_positions(list(ends))
        fresh = [tp for tp in ends if tp not in resume]
        starts = self._start_positions(fresh, ends)
        positions = {tp: resume.get(tp, starts.get(tp, 0)) for tp in ends}
        log.info(
            "flow %s starts at %d partition(s) with progress on %s and %d without",
            self.flow.name,
            len(ends) - len(fresh),
            self.target_alias,
            len(fresh),
        )
        return self._leased(plan.build(positions, ids, {tp: positions[tp] for tp in fresh}), {})

    def latest(self, start: plan.Offsets) -> plan.Offsets:
        """The next plan after ``start``: current ends; ``start`` itself when nothing changed
        (continuous mode: always a new lease, unless the source does not answer: then no new
        plan yet, and Spark asks again)."""
        try:
            ends, ids = self._snapshot_now()
        except ClusterUnreachableError as exc:
            if self.mode != "continuous":
                raise
            self.unanswered = str(exc)  # the run loop says so (srm.replication.flow_state) and bounds the wait
            self.unanswered_cluster = exc.cluster or self.source_alias
            self._unanswered.add(self.unanswered_cluster)  # asked with a new client next time
            return start
        end, new = self._after(start, ends, ids)
        if self.mode != "continuous" and plan.same(start, end) and not new:
            return start
        return self._leased(end, start)

    def frozen(self) -> plan.Offsets:
        """Available-now: the ends taken when the run starts."""
        ends, ids = self.snapshot()
        return plan.build(ends, ids)

    def frozen_after(self, start: plan.Offsets, frozen: plan.Offsets) -> plan.Offsets:
        """Available-now: the next plan, never past ``frozen``; ``start`` itself when there is
        nothing left. Partitions that appeared since ``start`` was planned start at their earliest."""
        end, new = self._after(start, plan.positions(frozen), frozen["ids"])
        return start if plan.same(start, end) and not new else end

    def _after(self, start: plan.Offsets, ends: plan.Positions, ids: dict[str, str]) -> tuple[plan.Offsets, bool]:
        """The plan up to ``ends``; partitions ``start`` does not know begin at their earliest.
        Also: whether there are any."""
        known = plan.positions(start)
        new = [tp for tp in ends if tp not in known]
        initial = list_offsets(self.source_admin, new, "earliest") if new else {}
        return plan.build(ends, ids, initial), bool(new)

    def _leased(self, offsets: plan.Offsets, previous: plan.Offsets) -> plan.Offsets:
        if self.mode != "continuous":
            return offsets
        return {**offsets, "lease": int(previous.get("lease", 0)) + 1}

    def out_of_flow(self, *plans: plan.Offsets) -> set[str]:
        """The topics of ``plans`` the flow no longer replicates (YAML and srm-control lists as they are now)."""
        self._load()
        if self.control is None:
            raise InvariantError(f"planner of {self.flow.name}: the srm-control lists are read before they were loaded")
        if self.control.poll():
            self._select()
        return {t for p in plans for t in plan.topics(p) if not self.selector.replicates(t)}

    def ranges(self, start: plan.Offsets, end: plan.Offsets) -> list[CopyRange]:
        """What to copy between two plans; in continuous mode every partition of ``end`` (a lease).
        A range's start is only a plan: the copier resumes from the progress on the target."""
        remote = {t: self.selector.remote(t) for t, _ in plan.positions(end)}
        between = plan.lease_ranges if self.mode == "continuous" else plan.ranges
        return between(start, end, remote)

    def close(self) -> None:
        early, self._early = self._early, None
        if early is not None:
            futures.wait([early], timeout=CLOSE_WAIT_S)  # it uses the control reader closed below
        self._ahead.shutdown(wait=False)
        if self.control is not None:
            self.control.close()

    def resume_positions(self, partitions: list[tuple[str, int]]) -> plan.Positions:
        """Where each partition resumes: its progress on the target (none: it starts afresh)."""
        if not partitions:
            return {}
        progress = read_flow_progress(self.config.cluster(self.target_alias), self.flow, partitions)
        return {tp: progress[tp].next_offset for tp in partitions if tp in progress}

    def _start_positions(self, partitions: list[tuple[str, int]], ends: plan.Positions) -> plan.Positions:
        start = self.flow.settings.start
        if start == "latest":
            return {tp: ends[tp] for tp in partitions}
        if isinstance(start, datetime):
            return offsets_for_time(self.source_admin, partitions, int(start.timestamp() * 1000))
        return list_offsets(self.source_admin, partitions, "earliest")
