"""The handlers behind each srm-control command. Each returns what ``--json`` prints."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

from srm.config import load_config
from srm.config.mm2_import import import_mm2 as convert_mm2
from srm.config.summary import summary_json, summary_lines
from srm.devenv.local import LocalClusters
from srm.errors import SrmError
from srm.paths import local_dir
from srm.spark import driver
from srm.spark.session import check_master, is_local, local_master
from srm.spark.submit import job_script, spark_submit_command, submit_environment


def validate(args: argparse.Namespace) -> dict[str, Any] | None:
    config = load_config(args.config, strict=True)
    if args.json:
        return summary_json(config)
    print("\n".join(summary_lines(config)))
    print("\nconfiguration is valid")
    return None


def import_mm2(args: argparse.Namespace) -> dict[str, Any] | None:
    path = Path(args.properties)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SrmError(f"cannot read {path}: {exc.strerror}") from None
    result = convert_mm2(text, str(path))
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if args.json:
        return {"yaml": result.data, "warnings": result.warnings}
    print(result.to_yaml(str(path)), end="")
    return None


def run(args: argparse.Namespace) -> dict[str, Any] | None:
    """spark-submit of the job, in the foreground; SIGTERM and Ctrl-C stop it gracefully."""
    config = load_config(args.config, strict=True)
    flow = config.flow(args.source, args.target)
    job_args = ["--source", flow.source, "--target", flow.target, "--config", str(Path(config.file).resolve())]
    if args.job == "replicate":
        job_args += ["--mode", args.mode]
    else:
        from srm.offsets.checkpointing import require_checkpoints

        require_checkpoints(flow)
    master = args.master or local_master(flow.settings.tasks_max)
    check_master(master, "--master")
    command = spark_submit_command(
        f"{args.job}.py",
        job_args,
        master,
        executor_python=flow.settings.spark_pyspark_python,
        files=() if is_local(master) else (str(Path(config.file).resolve()),),
        clusters=config.flow_clusters(flow),
        cores=flow.settings.tasks_max,
    )
    if args.json:
        return {"command": command}
    if args.dry_run:
        print(shlex.join(command))
        return None
    sys.stdout.flush()
    # Ctrl-C and SIGTERM are for the job's Python driver, which stops gracefully (the copiers commit
    # first): spark-submit's JVM ignores them instead of tearing the job down (srm.spark.driver).
    environment = {**submit_environment(master), "SRM_RUN_BY": "srm-control run"}
    raise SystemExit(driver.run(command, environment, str(job_script(f"{args.job}.py"))))


def local(args: argparse.Namespace) -> dict[str, Any] | None:
    config = load_config(args.config, strict=True)
    clusters = LocalClusters(config.local_clusters(), local_dir())
    if not clusters.members:
        raise SrmError(f"{config.file} marks no cluster as local (add `local: true` to a cluster)")
    if args.action == "up":
        lines = clusters.up()
    elif args.action == "down":
        lines = clusters.down()
    else:
        states = clusters.states()
        if args.json:
            return {"clusters": [vars(s) for s in states]}
        lines = [str(s) for s in states]
    if args.json:
        return {"result": lines}
    print("\n".join(lines))
    return None
