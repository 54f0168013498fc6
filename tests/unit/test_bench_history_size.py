"""The history-size benchmark's flow settings: each linger it is asked for is one the flow accepts."""

from __future__ import annotations

import pytest

from bench.history_size import flow_settings
from srm.config.settings import FlowSettings


@pytest.mark.parametrize(("linger", "interval"), [(0, 100), (50, 100), (100, 200), (500, 1000)])
def test_each_linger_runs_with_an_interval_above_it(linger: int, interval: int) -> None:
    settings = FlowSettings.model_validate(flow_settings(linger))
    assert (settings.transaction_linger_ms, settings.transaction_interval_ms) == (linger, interval)
