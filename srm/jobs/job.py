"""What the Spark jobs share: their log lines, the flow and Spark session they run for, and how a
failure ends them (a message on stderr and an exit status)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from srm.config import load_config
from srm.config.model import Flow, SrmConfig
from srm.errors import ConfigError, FlowTakenOverError, SrmError
from srm.spark.session import build_context_session, shipped_config


def start_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("py4j").setLevel(logging.WARNING)


def job_flow(args: argparse.Namespace) -> tuple[SrmConfig, Flow]:
    """The configuration (``--config``) and the flow (``--source``, ``--target``) of a job."""
    config = load_config(shipped_config(args.config), strict=True)
    return config, config.flow(args.source, args.target)


def flow_session(args: argparse.Namespace, job: str) -> tuple[SrmConfig, Flow, Any]:
    """As :func:`job_flow`, and the job's Spark session (``--master``), without Spark SQL, which
    no job uses (:class:`srm.spark.session.ContextSession`)."""
    config, flow = job_flow(args)
    spark = build_context_session(f"srm {job} {flow.name}", args.master, clusters=config.flow_clusters(flow))
    return config, flow, spark


def exit_status(exc: SrmError) -> int:
    """Say on stderr why the job failed; its exit status: FlowTakenOverError.EXIT_STATUS or 1."""
    if isinstance(exc, ConfigError):
        print(f"error: {len(exc.issues)} problem(s) in the configuration:\n{exc}", file=sys.stderr)
        return 1
    print(f"error: {exc}", file=sys.stderr)
    return FlowTakenOverError.EXIT_STATUS if isinstance(exc, FlowTakenOverError) else 1
