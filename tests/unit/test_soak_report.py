"""The soak report's verdicts on issue 45's criteria, from a result as ``bench.soak`` writes it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.report.endurance import endurance
from bench.soak.report import criteria, section


def result(*, rss_growth: float, pass_growth: float, lost: int = 0) -> dict[str, Any]:
    samples = [
        {
            "minute": float(m),
            "job_rss_mb": 1000 + rss_growth * m,
            "source_broker_rss_mb": 1000.0,
            "target_broker_rss_mb": 1000.0 + (m % 2),
            "history_topic_mb": 100.0 if m > 40 else 2.5 * m,
            "history_table_mb": 20.0,
            "history_rows": 1_000_000,
            "checkpoint_pass_s": 10.0 + (pass_growth if m > 100 else 0.0),
            "checkpoint_peak_pss_mb": 600.0,
        }
        for m in range(1, 121)
    ]
    faults = [
        {"kind": f"k{i % 8}", "at_s": 300.0 * i, "duration_s": 1.0, "recovered_s": 12.0, "detail": ""}
        for i in range(24)
    ]
    return {
        "options": {
            "minutes": 120,
            "rate": 5000,
            "partitions": 64,
            "topics": 16,
            "retention_minutes": 30.0,
            "groups": 200,
            "prune_s": 300.0,
        },
        "samples": samples,
        "faults": faults,
        "lost": lost,
        "duplicated": 0,
        "sent": 36_000_000,
        "records": 36_000_000,
        "history_pruned": True,
        "failover": {"groups": 200, "partitions": 12_800, "missing": 0, "re_read": 0, "skipped": 0, "seconds": 41.6},
        "job_starts": 3,
    }


def verdicts(r: dict[str, Any]) -> dict[str, bool]:
    return {c: ok for c, _, ok in criteria(r)}


def test_a_flat_soak_meets_every_criterion_and_its_section_says_so() -> None:
    r = result(rss_growth=0.0, pass_growth=0.0)
    assert all(verdicts(r).values()), criteria(r)
    text = section(r, "python -m bench.soak --minutes 120", "soak.png")
    assert "| at least 24 faults of at least 8 kinds | 24 of 8 kinds | yes |" in text
    assert "| 0 / 0 (200 groups, 12800 positions; srm-control failover took 42 s) |" in text
    assert "**no**" not in text
    assert "`transaction.linger.ms` the default, `transaction.interval.ms` the default." in text
    r["options"] |= {"linger_ms": 100, "interval_ms": 200}
    text = section(r, "python -m bench.soak --minutes 120 --linger-ms 100 --interval-ms 200", "soak.png")
    assert "`transaction.linger.ms` 100, `transaction.interval.ms` 200." in text


def test_memory_that_grows_a_checkpoint_pass_that_slows_and_a_lost_record_are_each_not_met() -> None:
    v = verdicts(result(rss_growth=1.0, pass_growth=5.0, lost=1))  # +60 MiB an hour on ~1 GiB; 10 s -> 15 s
    assert not v["0 lost, 0 duplicated, order kept"]
    assert not v["replicate job: RSS of its process tree (the minute's median) within +-5% per hour (each lifetime)"]
    assert v["source broker: RSS (the minute's median) within +-5% per hour (each lifetime)"]
    assert not v["last checkpoint pass (its own duration): the last 10 minutes within 1.2x of minutes 10-20"]
    topic = "history topic: its log segments on disk: stops growing once retention applies"
    assert v[f"{topic} (the last 20 minutes within 1.1x of minutes 45-65)"]


def test_the_benchmark_report_carries_the_soak_section_and_the_history_size_table(tmp_path: Path) -> None:
    r = result(rss_growth=0.0, pass_growth=0.0)
    (tmp_path / "SOAK.md").write_text(section(r, "python -m bench.soak --minutes 120", "soak.png"))
    rows = [{"rate": 5000, "partitions": 8, "transactions_per_s": 10.0, "bytes_per_partition_hour": 1_234_567}]
    rows[0] |= {"runs_per_partition_hour": 36_000, "p99_ms": 21.5}
    (tmp_path / "history_size.json").write_text(json.dumps({"command": "python -m bench.history_size", "rows": rows}))
    text = endurance(tmp_path)
    assert "### Endurance: a soak under faults" in text
    assert "`python -m bench.soak --minutes 120`" in text
    assert "| 0 | 5,000 | 8 | 10.0 | 1,234,567 | 36,000 | 21.5 |" in text, "a row without a linger: the default"


def test_restarts_do_not_hide_memory_that_climbs_while_each_process_lives() -> None:
    r = result(rss_growth=0.0, pass_growth=0.0)
    for sample in r["samples"]:  # +3 MiB a minute (~17% an hour), back to 1,000 at each restart
        sample["source_broker_rss_mb"] = 1000.0 + 3.0 * (sample["minute"] % 40)
    r["faults"][7] |= {"kind": "restart_source", "at_s": 40 * 60.0}
    r["faults"][15] |= {"kind": "restart_source", "at_s": 80 * 60.0}
    (_, measured, met) = next(c for c in criteria(r) if c[0].startswith("source broker"))
    assert not met and measured.count("%") == 1 and len(measured.split(",")) == 3, measured


def test_a_pass_that_grows_with_the_positions_added_is_told_apart_from_one_that_slows() -> None:
    r = result(rss_growth=0.0, pass_growth=0.0)
    for sample in r["samples"]:  # partitions added at minute 60: 12,800 -> 15,200 positions, 10 -> 11.9 s
        sample["checkpoint_positions"] = 12_800 if sample["minute"] < 60 else 15_200
        sample["checkpoint_pass_s"] = sample["checkpoint_positions"] / 1280
    v = verdicts(r)
    assert v["checkpoint pass: seconds per 1,000 group positions: the last 10 minutes within 1.2x of minutes 10-20"]
    for sample in r["samples"][100:]:  # the same positions, a slower pass
        sample["checkpoint_pass_s"] *= 1.5
    v = verdicts(r)
    assert not v["checkpoint pass: seconds per 1,000 group positions: the last 10 minutes within 1.2x of minutes 10-20"]


def test_the_soak_reads_groups_positions_and_seconds_from_the_pass_summary_as_the_pass_writes_it() -> None:
    from bench.soak.job import PASS_LINE, pass_cpu, pass_steps
    from srm.offsets.checkpointing import Direction, PassReport
    from srm.replication.accounting import Phases

    forward = Direction("forward", groups=200, written=[object()] * 13_000, unchanged=600)  # type: ignore[list-item]
    phases = Phases(started=100.0)
    phases.laps = [("groups", 2.5), ("history", 12.04), ("group sync", 4.5)]
    phases.last = 119.04
    phases.cpu_started, phases.cpu_last = 3.0, 10.26
    summary = PassReport("a->b", forward, Direction("backward"), None, phases).summary()
    found = PASS_LINE.search(summary)
    assert found is not None, summary
    assert (int(found[1]), int(found[2]) + int(found[3]), float(found[4])) == (200, 13_600, 19.0)
    # where the pass's time went, step by step: what a soak compares between its first and last passes
    assert pass_steps(found) == {"groups": 2.5, "history": 12.0, "group sync": 4.5}
    assert pass_cpu(found) == 7.3  # its own work, apart from what it waited for
    older = PASS_LINE.search(summary.replace(", 7.3 s of CPU", ""))  # a pass of a version before
    assert pass_cpu(older) is None and pass_steps(older) == pass_steps(found)


def test_history_that_grows_with_the_partitions_added_is_told_apart_from_history_that_grows_with_time() -> None:
    rows = "history table rows of the flow per source partition: stops growing once retention applies"
    rows += " (the last 20 minutes within 1.1x of minutes 45-65)"
    r = result(rss_growth=0.0, pass_growth=0.0)
    for sample in r["samples"]:  # 64 -> 76 partitions over the run, the same rows per partition
        sample["source_partitions"] = 64 + int(sample["minute"] // 10)
        sample["history_rows"] = 15_000 * sample["source_partitions"]
    assert verdicts(r)[rows]
    for sample in r["samples"]:  # the same partitions, rows that keep coming
        sample["history_rows"] = 15_000 * sample["source_partitions"] * (1 + sample["minute"] / 120)
    assert not verdicts(r)[rows]


def test_the_history_is_judged_by_its_means_over_20_minutes_not_by_where_its_sawtooth_ends() -> None:
    r = result(rss_growth=0.0, pass_growth=0.0)
    for sample in r["samples"]:  # pruned every 5 minutes back to 100, +6 a minute between
        sample["source_partitions"] = 64
        sample["history_table_mb"] = 64 * (100.0 + 6.0 * ((sample["minute"] - 1) % 5))
    name = next(c for c, _, _ in criteria(r) if c.startswith("history table on disk"))
    assert "per source partition" in name and name.endswith("(the last 20 minutes within 1.1x of minutes 45-65)")
    r["samples"] = r["samples"][:-2]  # the samples end on a climb
    assert verdicts(r)[name]
    for sample in r["samples"]:  # each prune leaves 2% more than the one before: +24% an hour
        sample["history_table_mb"] *= 1 + 0.02 * ((sample["minute"] - 1) // 5)
    assert not verdicts(r)[name]
    measured = next(m for c, m, _ in criteria(r) if c == name)
    assert "the least after each prune: +" in measured  # the troughs' slope, told beside


def test_the_history_of_partitions_a_fault_added_does_not_count_until_retention_applies_to_them() -> None:
    r = result(rss_growth=0.0, pass_growth=0.0)
    for sample in r["samples"]:  # 64 partitions at 15,000 rows; 12 added at minute 60 fill up for 35 minutes
        young = 12 * 15_000 * min(1.0, max(0.0, sample["minute"] - 60) / 35) if sample["minute"] >= 60 else 0
        sample["source_partitions"] = 64 if sample["minute"] < 60 else 76
        sample["history_rows"] = 64 * 15_000 + young
        sample["history_table_mb"] = sample["history_rows"] / 10_000
        sample["settled_partitions"] = 64 if sample["minute"] < 95 else 76
        sample["settled_rows"] = 64 * 15_000 + (young if sample["minute"] >= 95 else 0)
    name = next(c for c, _, _ in criteria(r) if c.startswith("history table rows"))
    assert "per settled source partition" in name and verdicts(r)[name]
    for sample in r["samples"]:  # samples of an earlier soak: per source partition
        del sample["settled_rows"]
    name = next(c for c, _, _ in criteria(r) if c.startswith("history table rows"))
    assert "per source partition" in name and "settled" not in name


def test_how_far_back_the_history_reaches_is_bounded_by_retention_a_prune_and_a_retention_check() -> None:
    from datetime import UTC, datetime, timedelta

    import pyarrow as pa

    from bench.soak.history import history_span_min

    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    rows = pa.table(
        {
            "topic": ["a", "a", "b", "young"],
            "partition": [0, 0, 0, 0],
            "committed_at": [t0, t0 + timedelta(minutes=40), t0 + timedelta(minutes=5), t0 + timedelta(minutes=39)],
        }
    )
    assert history_span_min(rows, {("a", 0), ("b", 0)}) == 40.0  # a[0] reaches back furthest
    assert history_span_min(rows, {("young", 0)}) == 1.0

    r = result(rss_growth=0.0, pass_growth=0.0)
    for sample in r["samples"]:
        sample["history_span_min"] = 36.0 if sample["minute"] >= 45 else sample["minute"]
    name = next(c for c, _, _ in criteria(r) if c.startswith("how far back"))
    assert verdicts(r)[name] and "(40 minutes)" in name
    r["samples"][-1]["history_span_min"] = 41.0  # a prune that kept more than the retention
    assert not verdicts(r)[name]


def test_the_report_shows_which_step_of_the_checkpoint_pass_slowed_down() -> None:
    r = result(rss_growth=0.0, pass_growth=0.0)
    steps = {"groups": 1.0, "history": 4.0, "checkpoints": 2.0}
    r["passes"] = [
        {"at_s": 60 * minute, "seconds": 7.0, "steps": dict(steps)} for minute in (5.0, 12.0, 15.0, 100.0, 112.0)
    ]
    r["passes"][-1]["steps"]["history"] = 10.0  # the last pass read its history slower
    text = section(r, "python -m bench.soak", None)
    assert "| step | 10-20 min (2 passes) | 110-121 min (1 pass) |" in text
    assert "| history | 4.00 | 10.00 |" in text
    assert "| groups | 1.00 | 1.00 |" in text
    del r["passes"]  # a soak of a pass that logged no steps: no table
    assert "| step |" not in section(r, "python -m bench.soak", None)


def test_a_minutes_rss_is_the_median_of_its_readings_and_a_tree_not_running_is_left_out(monkeypatch: Any) -> None:
    from bench.soak import samples

    readings = samples.Readings()
    found = iter([1100.0, 0.0, 1300.0, 1110.0])  # a batch's peak; a restart
    monkeypatch.setattr(samples, "tree_rss_mb", lambda pid: next(found))
    for _ in range(4):
        readings.take({"job": 7})
    assert readings.median("job", 999.0) == 1110.0  # of 1100, 1300, 1110: the peak does not move it
    assert readings.median("job", 999.0) == 999.0  # the next minute starts empty: the instant reading


def test_the_report_splits_the_historys_rows_into_the_commit_rate_and_the_minutes_it_reaches_back() -> None:
    from bench.soak.report import history_rate

    r = result(rss_growth=0.0, pass_growth=0.0)
    assert history_rate(r) == []  # samples without settled rows: nothing to split
    for sample in r["samples"]:  # 64 partitions reaching back 32 minutes; the commit rate 1.2x from minute 80
        rate = 900.0 if sample["minute"] < 80 else 1080.0
        sample.update(settled_partitions=64, history_span_min=32.0, settled_rows=int(64 * 32 * rate))
    line = history_rate(r)[-1]
    assert "900 in minutes 45-65" in line and "1,080 in the last 20 minutes (1.20x)" in line
    assert "900-1,080 after minute 45" in line
    assert line in section(r, "cmd", None)
