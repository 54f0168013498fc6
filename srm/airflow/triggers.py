"""The trigger behind the stall sensor: waits, in the triggerer, for a fresh replicated heartbeat."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent


class HeartbeatTrigger(BaseTrigger):
    """Fires ``fresh`` as soon as ``A.heartbeats`` on B is younger than the threshold, else ``stale``."""

    def __init__(
        self, config_file: str, source: str, target: str, *, threshold_s: float, timeout_s: float, poll_s: float = 5.0
    ) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.config_file, self.source, self.target = config_file, source, target
        self.threshold_s, self.timeout_s, self.poll_s = threshold_s, timeout_s, poll_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "srm.airflow.triggers.HeartbeatTrigger",
            {
                "config_file": self.config_file,
                "source": self.source,
                "target": self.target,
                "threshold_s": self.threshold_s,
                "timeout_s": self.timeout_s,
                "poll_s": self.poll_s,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            age = await asyncio.to_thread(heartbeat_age, self.config_file, self.source, self.target)
            if age is not None and age <= self.threshold_s:
                yield TriggerEvent({"status": "fresh", "age_s": age})  # type: ignore[no-untyped-call]
                return
            if time.monotonic() >= deadline:
                yield TriggerEvent({"status": "stale", "age_s": age})  # type: ignore[no-untyped-call]
                return
            await asyncio.sleep(self.poll_s)


def heartbeat_age(config_file: str, source: str, target: str) -> float | None:
    """Seconds since the newest heartbeat replicated by flow source->target (None: never one)."""
    from srm.config import load_config
    from srm.maintenance.heartbeats import freshness

    config = load_config(config_file, strict=False)
    return freshness(config.cluster(target), config.flow(source, target)).age_s
