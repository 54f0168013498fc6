"""One-off experiments: each answered one question of the lab notes (docs/benchmarks/lab-notes.md) and
is kept so that its figures can be measured again. Not part of ``make bench`` or ``make test-bench``,
and nothing in the harness imports them."""
