"""What a flow says about remote topics deleted from its target after it copied into them."""

from __future__ import annotations

from pathlib import Path

from srm.config import load_config
from srm.replication.progress import Progress
from srm.replication.remote_topics import deleted_error
from tests.helpers import offline_config


def test_the_stop_names_each_deleted_remote_topic_its_source_and_how_far_it_was_copied(tmp_path: Path) -> None:
    flow = load_config(offline_config(tmp_path)).flow("west", "east")
    gone = {("orders", 1): Progress(80, "id"), ("orders", 0): Progress(120, "id"), ("audit", 0): Progress(5, "id")}
    message = str(deleted_error(flow, gone))
    assert message.startswith(
        "flow west->east stopped (on_data_loss: fail): remote topic 'west.audit' (of 'audit', copied up to "
        "offset(s) [0] 5); remote topic 'west.orders' (of 'orders', copied up to offset(s) [0] 120, [1] 80) "
        "deleted from east after the flow copied into them"
    ), message
    assert "Set on_data_loss: continue for this flow to create them again and copy on" in message
