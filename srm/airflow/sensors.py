"""The stall sensor of a flow: is ``A.heartbeats`` on B fresh? Deferrable: it waits in the triggerer."""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseSensorOperator
from airflow.sdk.exceptions import AirflowFailException

from srm.airflow.triggers import HeartbeatTrigger, heartbeat_age


class ReplicationAliveSensor(BaseSensorOperator):
    """Passes when the flow's newest replicated heartbeat is at most ``threshold_s`` old; waits up
    to ``wait_s`` (deferred, in the triggerer) for one, then fails naming the heartbeat's age."""

    template_fields = ("threshold_s", "wait_s")

    def __init__(
        self, *, config_file: str, source: str, target: str, threshold_s: Any, wait_s: Any, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.config_file, self.source, self.target = config_file, source, target
        self.threshold_s, self.wait_s = threshold_s, wait_s

    def execute(self, context: Any) -> None:
        threshold, wait = float(self.threshold_s), float(self.wait_s)
        age = heartbeat_age(self.config_file, self.source, self.target)
        if age is not None and age <= threshold:
            self.log.info("flow %s->%s is alive: newest replicated heartbeat %.1f s old", self.source, self.target, age)
            return
        seen = "none" if age is None else f"{age:.1f} s old"
        self.log.info("newest replicated heartbeat: %s; waiting up to %.0f s for a fresh one", seen, wait)
        trigger = HeartbeatTrigger(self.config_file, self.source, self.target, threshold_s=threshold, timeout_s=wait)
        self.defer(trigger=trigger, method_name="execute_complete")

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> None:
        event = event or {}
        age = event.get("age_s")
        if event.get("status") == "fresh":
            self.log.info("flow %s->%s is alive: newest replicated heartbeat %.1f s old", self.source, self.target, age)
            return
        seen = (
            "no heartbeat has ever been replicated"
            if age is None
            else f"the newest replicated heartbeat is {age:.0f} s old"
        )
        raise AirflowFailException(
            f"flow {self.source}->{self.target} has stalled: {seen} (threshold {float(self.threshold_s):.0f} s). "
            f"Check the {self.source}_to_{self.target}.replicate DAG and both clusters."
        )
