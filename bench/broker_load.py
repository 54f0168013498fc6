"""What each replicator asks of the target's broker under the latency benchmark's load.

    .venv/bin/python -m bench.broker_load [--rate 5000] [--seconds 30] [--warmup-seconds 5] [--partitions 8]

On the local clusters (``make kafka-up``), ours (exactly once, its defaults), Kafka's textbook
exactly-once copier (``bench.textbook_copier``), the same in Java (transactions v2) and
MirrorMaker 2 copy the load of ``bench.latency`` in turn (``bench.eos_floor``'s tools). While the
load runs (the warm-up left out), the target's broker is watched: its requests by type (Kafka's
``RequestsPerSec`` counters, read over the JVM's local JMX connector, which ``jcmd <pid>
ManagementAgent.start_local`` opens), its CPU time, and its young collections (``jstat -gc``).
Prints JSON per tool: requests per second by type, per 1,000 records and (the transactional
tools) per transaction, the broker's CPU, and its young collections (how many, ms each, seconds
apart). Not part of ``make bench``: the report links its figures in the lab notes.

``--profile`` also records the target's broker with Java Flight Recorder during each window and
prints which parts of its work took its CPU and allocation samples (:mod:`bench.broker_profile`);
the recording costs the broker some CPU of its own, so the latencies of such a run are not quoted.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench import eos_floor, latency
from bench.broker_profile import jdk_tool, recording
from srm.config.model import Cluster
from srm.devenv.jvm import kafka_command
from srm.devenv.local import LocalKafka
from srm.paths import local_dir

REQUESTS = "kafka.network:type=RequestMetrics,name=RequestsPerSec,request=*,version=*"


@dataclass(frozen=True)
class Sample:
    began: float  # reading the counters takes a JVM's start (~1.5 s): a window runs from the
    ended: float  # end of its first reading to the beginning of its last
    requests: Counter[str]
    cpu_s: float
    young: int
    young_s: float


class BrokerWatch:
    """Counters of one local broker's JVM, read at the start and the end of a window."""

    def __init__(self, pid: int, profile_dir: Path | None = None) -> None:
        self.pid = pid
        self.url = self._jmx_url()
        self.windows: list[tuple[Sample, Sample]] = []
        self.profile_dir = profile_dir  # a JFR recording of each window goes there
        self.profiles: list[dict[str, Any]] = []

    @contextmanager
    def window(self) -> Iterator[None]:
        first = self.sample(requests_first=True)
        try:
            if self.profile_dir is None:
                yield
            else:
                with recording(self.pid, f"window{len(self.windows)}", self.profile_dir) as profile:
                    yield
                self.profiles.append(profile)
        finally:
            self.windows.append((first, self.sample(requests_first=False)))

    def sample(self, requests_first: bool) -> Sample:
        """The counters: the CPU and the collections read at the window's edge, the requests (a JVM's
        start) before it opens or after it closes."""
        began = time.monotonic()
        requests = self._requests() if requests_first else None
        times = psutil.Process(self.pid).cpu_times()
        young, young_s = self._young()
        if requests is None:
            requests = self._requests()
        return Sample(began, time.monotonic(), requests, times.user + times.system, young, young_s)

    def _jmx_url(self) -> str:
        jdk_tool("jcmd", str(self.pid), "ManagementAgent.start_local")
        status = jdk_tool("jcmd", str(self.pid), "ManagementAgent.status")
        found = re.search(r"Connection Type: local.*?URL\s*:\s*(\S+)", status, re.S)
        if found is None:
            raise SystemExit(f"no local JMX connector on the broker (pid {self.pid}):\n{status}")
        return found[1]

    def _requests(self) -> Counter[str]:
        args = ("--jmx-url", self.url, "--object-name", REQUESTS, "--attributes", "Count", "--one-time", "true")
        command = kafka_command("org.apache.kafka.tools.JmxTool", *args, "--report-format", "properties")
        out = subprocess.run(command, check=True, capture_output=True, text=True).stdout.replace("\n", ",")
        counts: Counter[str] = Counter()
        for found in re.finditer(r"request=(\w+),version=\d+:Count=(\d+)", out):
            counts[found[1]] += int(found[2])
        return counts

    def _young(self) -> tuple[int, float]:
        header, values = jdk_tool("jstat", "-gc", str(self.pid)).split("\n")[:2]
        row = dict(zip(header.split(), values.split(), strict=True))
        return int(row["YGC"]), float(row["YGCT"])


def figures(first: Sample, last: Sample, records: int) -> dict[str, Any]:
    seconds = last.began - first.ended
    counts = last.requests - first.requests  # the requests of the window, by type
    rates = {k: n / seconds for k, n in counts.items()}
    young = last.young - first.young
    transactions = counts["EndTxn"]
    return {
        "seconds": round(seconds, 1),
        "broker_cpu_pct": round(100 * (last.cpu_s - first.cpu_s) / seconds, 1),
        "requests_per_s": {k: round(v, 1) for k, v in sorted(rates.items(), key=lambda kv: -kv[1]) if v >= 0.5},
        "requests_per_1000_records": round(1000 * counts.total() / records, 1) if records else None,
        "transactions_per_s": round(transactions / seconds, 1),
        "requests_per_transaction": round(counts.total() / transactions, 1) if transactions else None,
        "young_collections": young,
        "young_collection_ms": round(1000 * (last.young_s - first.young_s) / young, 1) if young else None,
        "young_collection_every_s": round(seconds / young, 1) if young else None,
    }


def target_broker(target: Cluster) -> int:
    pid = LocalKafka(target.alias, target.local, local_dir(), target).pid() if target.local else None
    if pid is None:
        raise SystemExit(f"{target.alias} is not a local cluster running here: start it with make kafka-up")
    return pid


def measure(config_path: Path, load: latency.Load, *, profile: bool = False) -> dict[str, Any]:
    source, target = latency.clusters(config_path)
    out: dict[str, Any] = dict(load.described())
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        watch = BrokerWatch(target_broker(target), workdir if profile else None)
        for name, start in eos_floor.tools(config_path, workdir, load.partitions).items():
            run = latency.run_with(start, source, target, load, during=watch.window)
            out[name] = {"p50_ms": run["p50_ms"], "p99_ms": run["p99_ms"]} | figures(*watch.windows[-1], run["records"])
            if profile:
                out[name]["profile"] = watch.profiles[-1]
    return out


def main() -> None:
    parser = latency.load_arguments(__doc__.split("\n")[0], seconds=30)
    parser.add_argument(
        "--profile", action="store_true", help="record the target's broker with JFR: where its CPU and allocation go"
    )
    args = parser.parse_args()
    load = latency.Load(args.rate, args.seconds, args.partitions, args.warmup_seconds)
    print(json.dumps(measure(Path(args.config), load, profile=args.profile), indent=2))


if __name__ == "__main__":
    main()
