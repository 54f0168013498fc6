"""How a policy is named in YAML (``replication.policy.class``) and turned into an instance.

Accepted names: ``default``, ``identity``, MM2's Java class names for those two (so an imported
``mm2.properties`` keeps working), or the dotted path of a custom Python class
(``mypkg.naming.RegionPolicy`` or ``mypkg.naming:RegionPolicy``) that subclasses
:class:`ReplicationPolicy` or provides every method of its interface.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, cast

from include.policies.base import ReplicationPolicy
from include.policies.default import DefaultReplicationPolicy
from include.policies.identity import IdentityReplicationPolicy

BUILTIN_POLICIES: dict[str, type[ReplicationPolicy]] = {
    "default": DefaultReplicationPolicy,
    "identity": IdentityReplicationPolicy,
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": DefaultReplicationPolicy,
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,
}

INTERFACE_METHODS = tuple(
    name for name, member in inspect.getmembers(ReplicationPolicy, inspect.isfunction) if not name.startswith("_")
)


class PolicyLoadError(ValueError):
    """A ``replication.policy.class`` that cannot be imported or does not implement the interface."""


def resolve_policy_class(name: str) -> type[ReplicationPolicy]:
    """Return the class for a policy name; raise PolicyLoadError saying exactly what is wrong."""
    if name in BUILTIN_POLICIES:
        return BUILTIN_POLICIES[name]
    if name.startswith("org.apache.kafka."):
        raise PolicyLoadError(
            f"replication policy {name!r} is a Java class; only DefaultReplicationPolicy and "
            "IdentityReplicationPolicy map to built-in policies, port others to Python"
        )
    module_name, _, class_name = name.replace(":", ".").rpartition(".")
    if not module_name:
        raise PolicyLoadError(
            f"replication policy {name!r} is neither 'default', 'identity' nor a dotted path "
            "like 'mypackage.module.MyPolicy'"
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise PolicyLoadError(f"replication policy {name!r}: cannot import module {module_name!r}: {exc}") from exc
    cls = getattr(module, class_name, None)
    if not inspect.isclass(cls):
        raise PolicyLoadError(f"replication policy {name!r}: module {module_name!r} has no class {class_name!r}")
    _check_complete(name, cls)
    return cast("type[ReplicationPolicy]", cls)


def _check_complete(name: str, cls: type) -> None:
    if issubclass(cls, ReplicationPolicy):
        abstract = sorted(getattr(cls, "__abstractmethods__", ()))
        if abstract:
            raise PolicyLoadError(f"replication policy {name!r} does not implement {', '.join(abstract)}")
        return
    missing = [m for m in INTERFACE_METHODS if not callable(getattr(cls, m, None))]
    if missing:
        raise PolicyLoadError(
            f"replication policy {name!r} is not a ReplicationPolicy subclass and lacks {', '.join(missing)}"
        )


def load_policy(
    name: str,
    separator: str = ".",
    internal_topic_separator_enabled: bool = True,
    source_cluster_alias: str | None = None,
) -> ReplicationPolicy:
    """Build the policy a flow uses; ``source_cluster_alias`` is the flow's source (identity needs it)."""
    cls = resolve_policy_class(name)
    settings: dict[str, Any] = {
        "separator": separator,
        "internal_topic_separator_enabled": internal_topic_separator_enabled,
        "source_cluster_alias": source_cluster_alias,
    }
    # A duck-typed custom class receives the settings its constructor names, and no others.
    params = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        settings = {k: v for k, v in settings.items() if k in params}
    try:
        return cls(**settings)
    except Exception as exc:
        raise PolicyLoadError(f"replication policy {name!r} could not be constructed: {exc}") from exc
