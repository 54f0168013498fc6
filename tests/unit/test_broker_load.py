"""bench.broker_load's arithmetic: what a window of a broker's counters says per second and per transaction."""

from __future__ import annotations

from collections import Counter

from bench.broker_load import Sample, figures


def test_a_window_runs_from_the_end_of_its_first_reading_to_the_start_of_its_last() -> None:
    first = Sample(100.0, 101.5, Counter(Produce=1_000, EndTxn=100, Fetch=50), 10.0, 7, 0.2)
    last = Sample(121.5, 123.0, Counter(Produce=5_000, EndTxn=1_100, Fetch=250, WriteTxnMarkers=1_000), 22.0, 11, 0.36)
    out = figures(first, last, records=100_000)
    assert out["seconds"] == 20.0
    assert out["broker_cpu_pct"] == 60.0
    assert out["requests_per_s"] == {"Produce": 200.0, "EndTxn": 50.0, "WriteTxnMarkers": 50.0, "Fetch": 10.0}
    assert out["transactions_per_s"] == 50.0
    assert out["requests_per_transaction"] == 6.2  # (4,000 + 1,000 + 1,000 + 200) / 1,000
    assert out["requests_per_1000_records"] == 62.0
    assert (out["young_collections"], out["young_collection_ms"], out["young_collection_every_s"]) == (4, 40.0, 5.0)


def test_without_transactions_or_collections_there_is_no_ratio_to_give() -> None:
    first = Sample(0.0, 1.0, Counter(Produce=0), 0.0, 3, 0.1)
    last = Sample(11.0, 12.0, Counter(Produce=100), 1.0, 3, 0.1)
    out = figures(first, last, records=5_000)
    assert out["requests_per_transaction"] is None and out["transactions_per_s"] == 0.0
    assert out["young_collections"] == 0 and out["young_collection_every_s"] is None
