"""Where a local broker's CPU and allocation go: a Java Flight Recorder recording, sorted into parts.

``bench.broker_load --profile`` records the target's broker with JFR (``jcmd <pid> JFR.start``,
its ``profile`` settings) while each replicator's load runs, then sorts the recording's samples
into the parts of the broker's work a replicator causes: the requests it sends (Produce, Fetch,
Metadata), the work of Kafka transactions (the client's AddPartitionsToTxn, the broker's
verification that a partition is in the producer's transaction (KIP-890 part 1), EndTxn, the
transaction markers, the coordinator's log), the network threads every request passes through,
and the broker's own background work.

Samples are counted, not weighed: JFR throttles its allocation samples (at most 150 a second with
the ``profile`` settings), and a sample's weight is what its thread allocated since its previous
sample, which for a thread that rarely runs reaches back before the recording (one sample of the
transaction coordinator's timer weighed 6.4 GB in a 58 s recording). A part's share of the samples
is its share of the work, to within the sampling's noise.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from srm.devenv.jvm import java_binary

CPU = "jdk.ExecutionSample"
ALLOCATION = "jdk.ObjectAllocationSample"
# Deep enough to reach the KafkaApis handler from the allocations of a request's records.
STACK_DEPTH = 64

# (part, markers in the stack's frames, markers in the thread's name): the first part that matches
# a sample takes it, so the transaction parts come before the requests they run inside (a
# partition's verification starts within a Produce request; the append follows in a callback).
PARTS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    (
        "transactions: partition verification",
        ("AddPartitionsToTxnManager", "handleVerifyPartitionsInTransaction", "maybeStartTransactionVerification"),
        ("AddPartitionsToTxnSender",),
    ),
    (
        "transactions: markers",
        ("handleWriteTxnMarkersRequest", "TransactionMarkerChannelManager"),
        ("TxnMarkerSender",),
    ),
    ("transactions: EndTxn", ("handleEndTxnRequest",), ()),
    ("transactions: AddPartitionsToTxn", ("handleAddPartitionsToTxnRequest",), ()),
    ("transactions: coordinator, other", ("TransactionCoordinator", "TransactionStateManager"), ("transaction-log",)),
    # A transactional Produce appends its records once the partition is verified, in a callback.
    ("Produce", ("handleProduceRequest", "postVerificationCallback"), ()),
    ("Fetch", ("handleFetchRequest",), ("Fetch",)),
    ("Metadata", ("handleTopicMetadataRequest",), ()),
    ("network threads (every request)", (), ("network-thread", "socket-acceptor")),
    ("request handlers, other", (), ("request-handler",)),
)
BACKGROUND = "the broker's background work"


def part_of(frames: list[str], thread: str) -> str:
    """The part of the broker's work a sample belongs to (``frames``: ``Class.method``, innermost first)."""
    stack = " ".join(frames)
    for part, in_frames, in_thread in PARTS:
        if any(marker in stack for marker in in_frames) or any(marker in thread for marker in in_thread):
            return part
    return BACKGROUND


def samples(document: dict[str, Any]) -> Iterator[tuple[str, list[str], str]]:
    """(event type, frames, thread) of each sample of a ``jfr print --json`` document."""
    for event in document["recording"]["events"]:
        values = event["values"]
        trace = values.get("stackTrace") or {}
        frames = [f"{f['method']['type']['name']}.{f['method']['name']}" for f in trace.get("frames", [])]
        thread = values.get("sampledThread") or values.get("eventThread") or {}
        yield event["type"], frames, thread.get("javaName") or ""


def shares(found: Iterable[tuple[str, list[str], str]]) -> dict[str, Any]:
    """Per event type: how many samples, and each part's share of them in percent, largest first."""
    counts: dict[str, Counter[str]] = {CPU: Counter(), ALLOCATION: Counter()}
    for kind, frames, thread in found:
        counts.setdefault(kind, Counter())[part_of(frames, thread)] += 1
    out: dict[str, Any] = {}
    for kind, name in ((CPU, "cpu"), (ALLOCATION, "allocation")):
        total = counts[kind].total()
        out[f"{name}_samples"] = total
        out[f"{name}_pct"] = {part: round(100 * n / total, 1) for part, n in counts[kind].most_common()}
    return out


def jdk_tool(name: str, *args: str) -> str:
    """The output of one of the JDK's tools (jcmd, jstat, jfr) next to the java the project runs."""
    tool = str(Path(java_binary()).parent / name)
    return subprocess.run([tool, *args], check=True, capture_output=True, text=True).stdout


@contextmanager
def recording(pid: int, name: str, folder: Path) -> Iterator[dict[str, Any]]:
    """Record the JVM ``pid`` while the block runs; the dict it yields gets the recording's shares."""
    path = folder / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.jfr"
    found: dict[str, Any] = {}
    jdk_tool("jcmd", str(pid), "JFR.start", f"name={name}", "settings=profile")
    try:
        yield found
    finally:
        jdk_tool("jcmd", str(pid), "JFR.stop", f"name={name}", f"filename={path}")
    events = f"{CPU},{ALLOCATION}"
    printed = jdk_tool("jfr", "print", "--json", "--stack-depth", str(STACK_DEPTH), "--events", events, str(path))
    found.update(shares(samples(json.loads(printed))))
