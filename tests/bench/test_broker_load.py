"""``python -m bench.broker_load --profile`` watches the target's broker under each tool's load end to
end: its requests by type, and a Java Flight Recorder recording sorted into the parts of its work
(the figures are measured, never asserted on; what each tool's load is made of is)."""

from __future__ import annotations

import json
import sys

import pytest

from tests.bench.local import run_on_local_clusters


@pytest.mark.integration
@pytest.mark.bench
@pytest.mark.timeout(900)
def test_the_broker_load_profile_finds_transactions_under_ours_and_the_textbook_copiers_none_under_mm2() -> None:
    command = [sys.executable, "-m", "bench.broker_load", "--rate", "500", "--seconds", "5"]
    command += ["--warmup-seconds", "1", "--partitions", "3", "--profile"]
    run = run_on_local_clusters(command, timeout_s=840)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    figures = json.loads(run.stdout)
    names = ("ours_exactly_once", "textbook_exactly_once", "textbook_exactly_once_java", "mirrormaker2")
    ours, textbook, java, mm2 = (figures[t] for t in names)
    for transactional in (ours, textbook, java):
        assert transactional["transactions_per_s"] > 0 and transactional["requests_per_s"]["EndTxn"] > 0
    assert mm2["transactions_per_s"] == 0 and "EndTxn" not in mm2["requests_per_s"]
    # Transactions v1 (librdkafka) add the offsets to a transaction in a request of the client's;
    # v2 (Kafka's Java clients) has none, the transaction's partitions added by their leaders.
    assert textbook["requests_per_s"]["AddOffsetsToTxn"] > 0
    assert "AddOffsetsToTxn" not in java["requests_per_s"]
    for tool in (ours, textbook, java, mm2):
        assert tool["requests_per_s"]["Produce"] > 0
        profile = tool["profile"]
        assert profile["allocation_samples"] > 0
        assert 99.0 <= sum(profile["allocation_pct"].values()) <= 101.0
        assert profile["cpu_samples"] == 0 or 99.0 <= sum(profile["cpu_pct"].values()) <= 101.0
    sampled = {**ours["profile"]["cpu_pct"], **ours["profile"]["allocation_pct"]}
    assert any(part.startswith("transactions: markers") for part in sampled), sampled
