"""Replication policies: pure functions that name remote and internal topics (MM2 semantics)."""

from include.policies.base import HEARTBEATS_TOPIC, ReplicationPolicy
from include.policies.default import DefaultReplicationPolicy
from include.policies.identity import IdentityReplicationPolicy
from include.policies.loader import PolicyLoadError, load_policy, resolve_policy_class

__all__ = [
    "HEARTBEATS_TOPIC",
    "DefaultReplicationPolicy",
    "IdentityReplicationPolicy",
    "PolicyLoadError",
    "ReplicationPolicy",
    "load_policy",
    "resolve_policy_class",
]
