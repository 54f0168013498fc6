"""Writing translated offsets into the target's consumer groups, safely (``sync.group.offsets``).

Only a group that does not exist or has no member (EMPTY) is written; per partition only when
the target has no committed offset there or the translated one is ahead: offsets never move
backwards. The state is checked again right before each write, and the broker itself refuses to
alter the offsets of a group with members, so a consumer that joins in between is never touched.
Every group that is not written is reported with the reason.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from srm.mm2.records import Checkpoint
from srm.offsets.groups import alter_group_offsets, describe_groups, group_offsets

log = logging.getLogger(__name__)


@dataclass
class SyncReport:
    synced: dict[str, dict[tuple[str, int], int]] = field(default_factory=dict)  # group -> offsets written
    skipped: dict[str, str] = field(default_factory=dict)  # group -> why it was not written
    kept: dict[str, int] = field(default_factory=dict)  # group -> partitions already at or ahead


def sync_group_offsets(admin: Any, checkpoints: list[Checkpoint]) -> SyncReport:
    report = SyncReport()
    wanted: dict[str, dict[tuple[str, int], int]] = defaultdict(dict)
    for checkpoint in checkpoints:
        wanted[checkpoint.group][(checkpoint.topic, checkpoint.partition)] = checkpoint.downstream_offset
    if not wanted:
        return report
    states = describe_groups(admin, wanted)
    idle = [g for g in wanted if states[g].writable]
    for group in sorted(set(wanted) - set(idle)):
        state = states[group]
        report.skipped[group] = f"active on the target: {state.members} member(s), state {state.state}"
    current = group_offsets(admin, idle)
    for group in idle:
        committed = current[group].offsets
        ahead = {tp: o for tp, o in wanted[group].items() if tp not in committed or o > committed[tp].offset}
        report.kept[group] = len(wanted[group]) - len(ahead)
        if ahead:
            _write(admin, group, ahead, report)
    for group, reason in report.skipped.items():
        log.info("group offset sync: %s not written: %s", group, reason)
    return report


def _write(admin: Any, group: str, offsets: dict[tuple[str, int], int], report: SyncReport) -> None:
    state = describe_groups(admin, [group])[group]  # right before writing
    if not state.writable:
        report.skipped[group] = f"became active before the write: {state.members} member(s), state {state.state}"
        return
    refused = alter_group_offsets(admin, group, offsets)
    if refused:
        report.skipped[group] = f"refused by the broker: {refused}"
    else:
        report.synced[group] = offsets
