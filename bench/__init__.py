"""Benchmarks: throughput and latency of the replication job against the machine's limits and MM2."""
