"""The monitor's reader of a flow's lease statuses (srm.replication.status): what each partition's
current lease copied so far, at most STATUS_EVERY_S plus a commit old, where the lease's metrics
row arrives only when the lease ends.

One consumer per flow, kept between rounds and positioned after the last status read: a round
reads only what came since (the first reads the compacted topic whole). A status is kept until
its lease's row is counted (same partition, same lease start) or it is older than the monitor's
lease window.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from srm.config.model import Cluster, Flow
from srm.errors import SrmError
from srm.kafka import clients
from srm.kafka.internal_topics import status_topic_name
from srm.kafka.partitions import read_to_end
from srm.replication.status import LeaseStatus

log = logging.getLogger(__name__)
READ_S = 2.0  # a round's read of the statuses gives up after this long without a record


class StatusTail:
    def __init__(self, target: Cluster, flow: Flow, window_s: float) -> None:
        self.digest = clients.settings_digest(target)
        self.topic = status_topic_name(flow)
        self.window_ms = int(window_s * 1000)
        self._consumer: Any = clients.reader(target, "__srm.monitor")
        self._next: int | None = None  # the next offset to read; None: from the start
        # (topic, partition) -> lease start -> the newest status of that lease
        self._leases: dict[tuple[str, int], dict[int, LeaseStatus]] = {}

    def read(self) -> None:
        """What came since the last read, up to the topic's end (a missing topic reads as empty)."""
        try:
            for message in read_to_end(self._consumer, self.topic, 0, READ_S, keep_assigned=True, start=self._next):
                self._next = message.offset() + 1
                status = LeaseStatus.parse(message.key(), message.value())
                if status is not None:
                    self._leases.setdefault((status.topic, status.partition), {})[status.started_ms] = status
        except SrmError as exc:  # not created yet (the flow never ran), or the target not answering
            log.debug("statuses of %s not read: %s", self.topic, exc)

    def current(self, counted: dict[tuple[str, int], int]) -> list[LeaseStatus]:
        """The statuses of leases whose rows are not counted yet: ``counted`` holds the newest lease
        start counted per partition. Older statuses are forgotten."""
        oldest = int(time.time() * 1000) - self.window_ms
        out: list[LeaseStatus] = []
        for key in list(self._leases):
            leases = self._leases[key]
            for started in [s for s, status in leases.items() if s <= counted.get(key, -1) or status.at_ms < oldest]:
                del leases[started]
            if not leases:
                del self._leases[key]
                continue
            out.extend(leases[s] for s in sorted(leases))
        return out

    def forget(self, kept: set[tuple[str, int]]) -> None:
        """Drop the partitions the flow no longer has."""
        for key in set(self._leases) - kept:
            del self._leases[key]

    def close(self) -> None:
        self._consumer.close()
