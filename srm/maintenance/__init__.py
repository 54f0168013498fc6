"""Periodic upkeep of a flow: internal topics, remote topics, topic configs, ACLs, srm-meta.internal."""
