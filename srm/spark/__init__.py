"""Spark: the session and its settings, the spark-submit call, the job archive for executors off
this machine, and what a failed job means."""
