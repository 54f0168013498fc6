"""What operators run: failover and failback, MM2 takeover, a flow's health, the ACLs a flow needs."""
