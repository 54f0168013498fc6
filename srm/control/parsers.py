"""Subcommand parsers shared by the commands that act on one flow."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any


def flow_parser(
    sub: Any,
    common: argparse.ArgumentParser,
    name: str,
    help_text: str,
    description: str,
    *,
    required: bool = True,
    handler: Callable[[argparse.Namespace], Any] | None = None,
) -> argparse.ArgumentParser:
    """A subcommand with ``--source`` and ``--target`` (both required unless ``required`` is false)."""
    parser: argparse.ArgumentParser = sub.add_parser(name, parents=[common], help=help_text, description=description)
    parser.add_argument("--source", required=required, help="source cluster alias")
    parser.add_argument("--target", required=required, help="target cluster alias")
    if handler is not None:
        parser.set_defaults(handler=handler)
    return parser
