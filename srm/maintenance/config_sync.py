"""Topic config sync: remote topics keep the source topics' configs (MM2's rules).

For each replicated topic whose remote topic exists: settings the source wants copied (see
:mod:`srm.mm2.topic_configs`) are SET on the target where they differ; with ``use.defaults.from:
target`` (MM2's default) a setting the target topic has explicitly but the source topic leaves at
its default is DELETEd, so the target falls back to its own default. Settings matched by
``config.properties.exclude`` are never touched on the target.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from srm.config.model import Flow
from srm.kafka.retry import needs, retrying
from srm.kafka.topics import describe_configs_of
from srm.mm2.topic_configs import ConfigValue, configs_to_copy


@dataclass(frozen=True)
class ConfigChange:
    topic: str
    name: str
    old: str | None
    new: str | None  # None: deleted (back to the target's default)

    def __str__(self) -> str:
        if self.new is None:
            return f"{self.topic}: {self.name} {self.old} -> (default)"
        return f"{self.topic}: {self.name} {self.old if self.old is not None else '(default)'} -> {self.new}"


def config_changes(
    flow: Flow, topic: str, remote: str, source: list[ConfigValue], target: list[ConfigValue]
) -> list[ConfigChange]:
    s = flow.settings
    wanted = configs_to_copy(source, s.config_properties_exclude, s.use_defaults_from)
    excluded = (
        re.compile("|".join(f"(?:{p})" for p in s.config_properties_exclude)) if s.config_properties_exclude else None
    )
    current = {c.name: c for c in target}
    changes = []
    for name, value in sorted(wanted.items()):
        found = current.get(name)
        if found is not None and found.read_only:
            continue
        if found is None or found.value != value:
            changes.append(ConfigChange(remote, name, found.value if found else None, value))
    if s.use_defaults_from == "target":
        for entry in target:
            explicit = entry.source == "DYNAMIC_TOPIC_CONFIG" and not entry.read_only
            if explicit and entry.name not in wanted and not (excluded and excluded.fullmatch(entry.name)):
                changes.append(ConfigChange(remote, entry.name, entry.value, None))
    return changes


def sync_topic_configs(flow: Flow, source_admin: Any, target_admin: Any, topics: dict[str, str]) -> list[ConfigChange]:
    """Bring every remote topic in ``topics`` (source name -> remote name) in line; the changes made."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType  # type: ignore[attr-defined]

    made: list[ConfigChange] = []
    sources = describe_configs_of(source_admin, list(topics))
    remotes = describe_configs_of(target_admin, list(topics.values()))
    for topic, remote in sorted(topics.items()):
        changes = config_changes(flow, topic, remote, sources[topic], remotes[remote])
        if not changes:
            continue
        entries = [
            ConfigEntry(
                c.name,
                c.new,
                incremental_operation=AlterConfigOpType.SET if c.new is not None else AlterConfigOpType.DELETE,
            )
            for c in changes
        ]
        resource = ConfigResource(ResourceType.TOPIC, remote, incremental_configs=entries)

        def alter(resource: Any = resource) -> None:
            for future in target_admin.incremental_alter_configs([resource]).values():
                future.result(30)

        needed = needs(target_admin, "ALTER_CONFIGS", f"TOPIC {remote!r}")
        retrying(alter, f"cannot change the configs of {remote!r} on {flow.target}", cluster=flow.target, needed=needed)
        made += changes
    return made
