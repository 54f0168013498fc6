"""Planning micro-batches (driver side): which source partitions to copy, up to which offset.

Runs in the Python process Spark keeps for the streaming source. Each call re-discovers the
source's topics through the flow's predicate, so new topics and partitions and edited
allow/deny lists (the YAML's and srm-control's) take effect at the next trigger; the
configuration file is re-read when it changes. Ends are last stable offsets (read_committed).
Where a partition starts the first time: the target's committed progress if there is any, else
the flow's ``start`` position for partitions that exist when the flow starts, and the earliest
offset for partitions that appear later (everything in them is new).
"""

from __future__ import annotations

import logging
import os
from datetime import datetime

from srm import clients
from srm.config import load_config
from srm.config.model import Flow, SrmConfig
from srm.control_lists import ControlReader
from srm.replication import offsets as plan
from srm.replication.job import CopyRange
from srm.replication.progress import progress_group, read_group_progress
from srm.replication.selector import TopicSelector
from srm.topics import list_offsets, offsets_for_time, partition_counts, topic_ids

log = logging.getLogger(__name__)


class Planner:
    def __init__(self, config_path: str, source: str, target: str) -> None:
        self.config_path = config_path
        self.source_alias, self.target_alias = source, target
        self._mtime = 0.0
        self.control: ControlReader | None = None
        self.config: SrmConfig
        self.flow: Flow
        self.selector: TopicSelector
        self._load()
        self.source_admin = clients.admin_client(self.config.cluster(source))
        self.target_admin = clients.admin_client(self.config.cluster(target))

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
        assert self.control is not None
        lists = self.control.lists(self.flow, "topics")
        self.selector = TopicSelector(self.flow, lists.allow, lists.deny)

    # --- what exists ---------------------------------------------------------------------------
    def topics(self) -> dict[str, int]:
        """Replicated source topics and their partition counts."""
        self._load()
        assert self.control is not None
        if self.control.poll():
            self._select()
            lists = self.control.lists(self.flow, "topics")
            log.info("srm-control lists of %s changed: allow %s, deny %s", self.flow.name, lists.allow, lists.deny)
        counts = partition_counts(self.source_admin, include_internal=True)
        return {t: n for t, n in sorted(counts.items()) if self.selector.replicates(t)}

    def snapshot(self) -> tuple[plan.Positions, dict[str, str]]:
        topics = self.topics()
        partitions = [(t, p) for t, n in topics.items() for p in range(n)]
        return list_offsets(self.source_admin, partitions, "latest"), topic_ids(self.source_admin, list(topics))

    # --- plans --------------------------------------------------------------------------------
    def initial(self) -> plan.Offsets:
        """Where a query without a Spark checkpoint starts: progress on the target, else ``start``."""
        ends, ids = self.snapshot()
        remote = [(self.selector.remote(t), p) for t, p in ends]
        # Not stable: a killed job's open transaction would block the read until it times out, and
        # the copier re-reads the stable progress after fencing that transaction anyway.
        progress = read_group_progress(
            self.config.cluster(self.target_alias), progress_group(self.source_alias), remote, stable=False
        )
        positions: plan.Positions = {}
        fresh = [tp for tp in ends if (self.selector.remote(tp[0]), tp[1]) not in progress]
        starts = self._start_positions(fresh, ends)
        for tp in ends:
            done = progress.get((self.selector.remote(tp[0]), tp[1]))
            positions[tp] = done.next_offset if done else starts[tp]
        log.info(
            "flow %s starts at %d partition(s) with progress on %s and %d without",
            self.flow.name,
            len(ends) - len(fresh),
            self.target_alias,
            len(fresh),
        )
        return plan.build(positions, ids, {tp: positions[tp] for tp in fresh})

    def latest(self, start: plan.Offsets) -> plan.Offsets:
        """The next plan after ``start``: current ends; ``start`` itself when nothing changed."""
        ends, ids = self.snapshot()
        known = plan.positions(start)
        new = [tp for tp in ends if tp not in known]
        initial = list_offsets(self.source_admin, new, "earliest") if new else {}
        end = plan.build(ends, ids, initial)
        return start if plan.same(start, end) and not new else end

    def ranges(self, start: plan.Offsets, end: plan.Offsets) -> list[CopyRange]:
        remote = {t: self.selector.remote(t) for t, _ in plan.positions(end)}
        return plan.ranges(start, end, remote)

    def _start_positions(self, partitions: list[tuple[str, int]], ends: plan.Positions) -> plan.Positions:
        start = self.flow.settings.start
        if start == "latest":
            return {tp: ends[tp] for tp in partitions}
        if isinstance(start, datetime):
            return offsets_for_time(self.source_admin, partitions, int(start.timestamp() * 1000))
        return list_offsets(self.source_admin, partitions, "earliest")
