"""``python -m bench.report bench/results.json``: render REPORT.md and the plots again without measuring."""

from bench.report import main

main()
