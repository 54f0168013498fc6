"""What a running flow waits for, and since when, where ``srm-control status``, ``GET
/v2/replications`` and the Replications page read it while the cluster it waits for cannot answer.

The driver appends a row to the warehouse's ``flow_states`` table when its flow starts waiting for
a cluster (a lease that cannot be planned because a cluster does not answer, copiers whose lease
overran while a cluster does not answer), one when it copies again, and one when the run fails
(with its message, also when no Airflow task records the failure): a row per change, not per
minute. :func:`srm.operations.health.assess` shows ``waiting`` (or ``failed``) while the newest row says so
and no heartbeat crossed since, instead of ``running`` or a bare ``stalled``/``unknown``. A
failure to write a row is logged, never a reason to stop copying.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from srm.storage.warehouse import FLOW_STATES, Warehouse

log = logging.getLogger("srm.replicate")

WAITING, COPYING, FAILED = "waiting", "copying", "failed"


class FlowStates:
    def __init__(self, warehouse: Warehouse, flow: str, run_id: str) -> None:
        self.warehouse, self.flow, self.run_id = warehouse, flow, run_id
        self.state = COPYING
        self.cluster = ""
        self._version = 0

    def started(self) -> None:
        """A run of the flow begins: what an earlier run said (waiting, failed) is over."""
        self._record("")

    def waiting(self, cluster: str, reason: str) -> None:
        """The flow waits for ``cluster`` (``reason``: what failed); recorded once per change."""
        if self.state == WAITING and self.cluster == cluster:
            return
        self.state, self.cluster = WAITING, cluster
        log.warning("flow %s: waiting for %s: %s", self.flow, cluster, reason)
        self._record(reason)

    def copying(self) -> None:
        """The flow copies again (recorded only after a wait)."""
        if self.state == COPYING:
            return
        log.info("flow %s: %s answers again; copying goes on", self.flow, self.cluster)
        self.state, self.cluster = COPYING, ""
        self._record("")

    def failed(self, reason: str) -> None:
        """The run ended with ``reason`` (an error for the user: it names no secret)."""
        self.state, self.cluster = FAILED, ""
        self._record(reason)

    def _record(self, reason: str) -> None:
        self._version += 1
        row = {
            "flow": self.flow,
            "run_id": self.run_id,
            "state": self.state,
            "cluster": self.cluster,
            "reason": reason[:2000],
            "since": datetime.now(UTC),
        }
        try:
            self.warehouse.append(FLOW_STATES, [row], f"state:{self.flow}:{self.run_id}", self._version)
        except Exception:
            log.exception("flow %s: recording that it is %s failed", self.flow, self.state)
