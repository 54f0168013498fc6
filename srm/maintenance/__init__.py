"""Periodic upkeep of a flow: internal topics, remote topics, topic configs, ACLs, srm-meta.internal;
the hourly rollup of its metrics and the compaction of the warehouse's metrics tables."""
