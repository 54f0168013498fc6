"""The monitoring service at scale and under a fault, on the local clusters (make kafka-up).

    .venv/bin/python -m bench.monitoring --partitions 10000 --topics 100 [--requests 50] [--config conf/srm.yaml]

Creates ``--topics`` topics holding ``--partitions`` partitions in all (``--records`` records each),
copies them once (available-now, so every partition has lease metrics), then writes one more record
to every partition (so every partition is behind and its oldest record is read for the RPO). Then:

- the monitor's round on that flow, three times: the observation (Kafka and the warehouse), the
  rendering of the Prometheus exposition, its size and series;
- the app served by uvicorn on loopback: ``--requests`` scrapes of ``/metrics`` over HTTP, and
  ``--requests`` requests of ``/v2/replications`` (6 at a time, as 6 open tabs of the page) with the
  target cluster answering, then with its broker frozen (SIGSTOP) as a partitioned data centre looks.

The topics are deleted at the end and the broker is resumed (SIGCONT) whatever happens.
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import signal
import statistics
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent import futures
from pathlib import Path
from typing import Any

import yaml

from bench import latency
from bench.available_now import flow_config
from bench.checkpoints_scale import fill, submit
from bench.common import fill_partitions, percentile
from srm.config import load_config
from srm.devenv.local import LocalClusters
from srm.paths import local_dir
from srm.service.exposition import render
from srm.service.monitor import ConfigSource, Monitor
from tests.conftest import free_ports

CONCURRENT = 6
TOKEN = "bench-scrape-token"


def timed_requests(url: str, count: int, headers: dict[str, str], spread_s: float = 0.0) -> dict[str, Any]:
    """``count`` GETs of ``url``, CONCURRENT at a time (spread over ``spread_s``, as pages polling):
    seconds p50/p99/max, status codes."""
    pause = spread_s * CONCURRENT / max(1, count)

    def one(_: int) -> tuple[float, int]:
        time.sleep(pause)
        began = time.monotonic()
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=120) as response:
                response.read()
                code = response.status
        except urllib.error.HTTPError as error:
            code = error.code
        return time.monotonic() - began, code

    with futures.ThreadPoolExecutor(CONCURRENT) as pool:
        answers = list(pool.map(one, range(count)))
    seconds = [s for s, _ in answers]
    return {
        "requests": count,
        "p50_s": round(statistics.median(seconds), 3),
        "p99_s": round(percentile(seconds, 99), 3),
        "max_s": round(max(seconds), 3),
        "codes": sorted({c for _, c in answers}),
    }


class Served:
    """The REST app under uvicorn in a thread, on a free loopback port."""

    def __init__(self, path: Path) -> None:
        import uvicorn

        from srm.service.app import create_app

        self.app = create_app(
            path, user=lambda: "bench", groups_reader=lambda: None, paused=lambda ids: {}, flow_access=lambda *_: True
        )
        self.port = free_ports(1)[0]
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        while not self.server.started:
            time.sleep(0.05)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.app.state.monitor.stop()


def unreachable(served: Served, timeout_s: float = 60.0) -> list[dict[str, Any]]:
    """The clusters ``/v2/replications`` names unreachable (waiting up to ``timeout_s`` for one), each
    with ``since_s``: when the monitor first found it so (epoch seconds)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with urllib.request.urlopen(served.url("/v2/replications"), timeout=60) as response:
            down = [c for c in json.loads(response.read())["clusters"] if not c["reachable"]]
        if down:
            for cluster in down:
                cluster["since_s"] = calendar.timegm(time.strptime(cluster["since"], "%Y-%m-%dT%H:%M:%SZ"))
            return down
        time.sleep(0.5)
    return []


def rounds(path: Path, count: int = 3) -> list[dict[str, Any]]:
    """The monitor's round, timed: observing the flow, then rendering its exposition."""
    monitor = Monitor(ConfigSource(path), paused=lambda ids: {})
    out = []
    try:
        for _ in range(count):
            began = time.monotonic()
            snapshot = monitor.refresh()
            observed_s = time.monotonic() - began
            began = time.monotonic()
            text = render(snapshot)
            render_s = time.monotonic() - began
            [view] = snapshot.flows.values()
            out.append(
                {
                    "observe_s": round(observed_s, 2),
                    "render_s": round(render_s, 3),
                    "exposition_bytes": len(text),
                    "series": sum(1 for line in text.splitlines() if line and not line.startswith(b"#")),
                    "partitions": len(view.partitions),
                    "with_rpo": sum(1 for p in view.partitions if p.oldest_ms is not None),
                    "state": view.health.state,
                    "note": view.note,
                }
            )
    finally:
        monitor.stop()
    return out


def target_pid(base: Path) -> tuple[int, str]:
    config = load_config(base)
    flow = config.enabled_flows()[0]
    for member in LocalClusters(config.local_clusters(), local_dir()).members:
        if member.alias == flow.target:
            pid = member.pid()
            if pid is not None:
                return pid, member.alias
    raise SystemExit(f"the target {flow.target} is not a running local cluster (make kafka-up)")


def run(base: Path, partitions: int, topics: int, records: int, requests: int) -> dict[str, Any]:
    config = load_config(base)
    flow = config.enabled_flows()[0]
    source, target = config.cluster(flow.source), config.cluster(flow.target)
    prefix = f"monbench-{uuid.uuid4().hex[:8]}-"
    names = [f"{prefix}{i:04d}" for i in range(topics)]
    pid, alias = target_pid(base)
    with tempfile.TemporaryDirectory() as tmp:
        path, src, tgt = flow_config(base, Path(tmp), f"{prefix}.*", True, 2)
        (Path(tmp) / "token").write_text(TOKEN)
        data = yaml.safe_load(path.read_text())
        data["monitoring"] = {"prometheus.token.file": str(Path(tmp) / "token")}
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        served: Served | None = None
        try:
            keys = fill(source, names, partitions, records)
            replicate_s, _, _ = submit(
                "replicate.py", ["--source", src, "--target", tgt, "--config", str(path), "--mode", "available-now"]
            )
            fill_partitions(source, keys, 1)  # one record behind on every partition
            found: dict[str, Any] = {"partitions": len(keys), "topics": topics, "replicate_s": round(replicate_s, 1)}
            found["rounds"] = rounds(path)
            served = Served(path)
            served.app.state.monitor.start().wait_round(1, 300)
            auth = {"Authorization": f"Bearer {TOKEN}"}
            found["scrape"] = timed_requests(served.url("/metrics"), requests, auth)
            found["replications"] = timed_requests(served.url("/v2/replications"), requests, {})
            os.kill(pid, signal.SIGSTOP)
            try:
                frozen_at = time.time()
                # Spread over 40 s: the requests span the monitor noticing (a round every 10 s).
                found["replications_frozen"] = timed_requests(served.url("/v2/replications"), requests, {}, 40.0)
                found["frozen_clusters"] = unreachable(served)
                found["frozen_named_unreachable_after_s"] = (
                    round(max(c["since_s"] for c in found["frozen_clusters"]) - frozen_at, 1)
                    if found["frozen_clusters"]
                    else None
                )
                found["frozen_scrape"] = timed_requests(served.url("/metrics"), requests, auth)
            finally:
                os.kill(pid, signal.SIGCONT)
            found["frozen_cluster"] = alias
        finally:
            if served is not None:
                served.stop()
            latency.delete_topics(source, names)
            latency.delete_topics(target, [f"{src}.{name}" for name in names])
    return found


def measure(config: Path, *, partitions: int, topics: int, records: int, requests: int) -> dict[str, Any]:
    """bench.run's part: :func:`run` with the preset's options."""
    return run(config, partitions, topics, records, requests)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--config", default="conf/srm.yaml")
    parser.add_argument("--partitions", type=int, default=10_000)
    parser.add_argument("--topics", type=int, default=100)
    parser.add_argument("--records", type=int, default=10, help="records per partition before the copy")
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    print(json.dumps(run(Path(args.config), args.partitions, args.topics, args.records, args.requests), indent=2))


if __name__ == "__main__":
    main()
