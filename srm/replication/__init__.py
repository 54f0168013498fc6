"""The replication data path: plan offset ranges, copy them exactly once, account for every record."""
