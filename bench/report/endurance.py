"""The report's endurance section: the soak (``bench.soak --out``) and the history's size per partition
and hour (``bench.history_size``), both run by hand."""

from __future__ import annotations

import json
from pathlib import Path


def endurance(folder: Path) -> str:
    """The soak (``bench.soak --out``: its SOAK.md) and the history's size per partition and hour
    (``bench.history_size``'s JSON in history_size.json), both run by hand: not part of ``make bench``."""
    soak = folder / "SOAK.md"
    lines = [
        "## Endurance",
        "",
        "A continuous flow for hours under a schedule of faults, checked record by record, with memory, history",
        "bytes, checkpoint passes and latency sampled every minute (`bench.soak`, run by hand; `make test-bench`",
        "runs a 4-minute one).",
        "",
    ]
    if soak.exists():
        lines.append("#" + soak.read_text().strip())  # its "## Endurance: ..." one level down
        lines.append("")
    sizes = folder / "history_size.json"
    if sizes.exists():
        found = json.loads(sizes.read_text())
        lines += [
            "### The sync history's size per partition and hour",
            "",
            f"`{found.get('command', 'python -m bench.history_size')}`: ours in continuous mode with its defaults",
            "but `transaction.linger.ms` (and `transaction.interval.ms` twice the linger from 100 ms), 100 B",
            "records; every transaction ends a run on each partition it touched, so the history follows the",
            "transactions, not the records. The prune keeps these figures times the source's retention.",
            "",
            "| transaction.linger.ms | records/s | partitions | transactions/s | bytes / partition / h "
            "| runs / partition / h | p99 (ms) |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in found["rows"]:
            lines.append(
                f"| {r.get('linger_ms', 0):,} | {r['rate']:,} | {r['partitions']} | {r['transactions_per_s']:,} | "
                f"{r['bytes_per_partition_hour']:,} | {r['runs_per_partition_hour']:,} | {r['p99_ms']} |"
            )
        lines.append("")
    return "\n".join(lines)
