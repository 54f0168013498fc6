"""How long Airflow takes to parse the DAG folder for a config with many flows.

    .venv/bin/python -m bench.dag_parse --flows 50

Writes a config with ``--flows`` flows between made-up clusters (nothing needs to run: parsing
does no I/O), then, in fresh interpreters, parses the DAG folder with Airflow's DagBag as the DAG
processor does and prints the median of ``--repeat`` parse times (Airflow's own import excluded)
as JSON.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from srm.devenv.airflow import LocalAirflow
from srm.paths import project_root


def flows_config(flows: int) -> dict[str, Any]:
    clusters = 2
    while clusters * (clusters - 1) < flows:
        clusters += 1
    names = [f"dc{i}" for i in range(clusters)]
    pairs = list(itertools.permutations(names, 2))[:flows]
    return {
        "clusters": {n: {"bootstrap.servers": f"kafka-{n}.example:9092"} for n in names},
        "flows": [{"source": a, "target": b, "sync.group.offsets.enabled": True} for a, b in pairs],
    }


def parse_once(home: Path, config: Path) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "srm.airflow.probe"],
        check=True,
        env=LocalAirflow(home, config).env(),
        cwd=project_root(),
        capture_output=True,
        text=True,
    )
    found: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--flows", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "srm.yaml"
        config.write_text(yaml.safe_dump(flows_config(args.flows), sort_keys=False))
        runs = [parse_once(Path(tmp) / "airflow", config) for _ in range(args.repeat)]
    errors = runs[-1]["import_errors"]
    times = [r["parse_s"] for r in runs]
    print(
        json.dumps(
            {
                "flows": args.flows,
                "dags": len(runs[-1]["dags"]),
                "import_errors": errors,
                "parse_s_median": round(statistics.median(times), 3),
                "parse_s_min": round(min(times), 3),
                "parse_s_max": round(max(times), 3),
                "heavy_imports": runs[-1]["heavy_imports"],
                "command": f"python -m bench.dag_parse --flows {args.flows} --repeat {args.repeat}",
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
