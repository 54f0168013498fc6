"""A soak: one continuous flow for hours under a steady load and a schedule of faults, checked record
by record while it runs, with memory, storage, pass times and latency sampled every minute.

    .venv/bin/python -m bench.soak --minutes 120 [--rate 5000] [--topics 16] [--partitions 64] [--json]

It starts two local clusters of its own (free loopback ports, a temporary folder), creates the
load's topics (``retention.ms`` from ``--retention-minutes``, so the source deletes records during
the run and the flow's sync history must follow), and runs:

- the flow ``soak-src -> soak-dst`` through ``srm-control run replicate`` in continuous mode, under
  a supervisor that starts it again whenever it ends (as the replicate DAG's retries would);
- its checkpoint pass on its schedule (``srm-control run checkpoints`` every
  ``emit.checkpoints.interval.seconds``) and the sync history's prune (the maintenance DAG's task);
- a steady load of sequence-numbered records over every partition (:mod:`.load`), 200 consumer
  groups committing positions at different lags on the source (:mod:`.groups`), and a checker
  that reads the target read_committed and checks every record once and in order per partition
  (:mod:`.checker`);
- a fault every few minutes, cycling through the kinds of :mod:`.faults`;
- a sample a minute of each process tree's RSS and PSS, the history's bytes (topic and table),
  the last checkpoint pass's duration and peak memory, a translation's time and p50/p99 latency
  (:mod:`.samples`).

At the end the load stops, the copy catches up, every group fails over (``srm-control failover
--planned --apply``) and each group's position on the target is checked against the source:
records re-read or skipped. The result is one JSON object (``--json``) and, with ``--out``, a
report section with a plot of each series over time and its slope per hour (:mod:`.report`).
"""
