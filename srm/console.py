"""Tables for people: srm-control's output and task logs, drawn by rich."""

from __future__ import annotations

import io
from collections.abc import Collection, Iterable, Sequence

WIDTH = 160  # wide enough for topic[partition]@offset columns; a longer cell folds within its column


def table_lines(columns: Sequence[str], rows: Iterable[Sequence[object]], *, right: Collection[str] = ()) -> list[str]:
    """The table as lines of text (cells taken literally, never as rich markup); ``right``: the
    columns aligned right (numbers)."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table()
    for column in columns:
        table.add_column(column, overflow="fold", justify="right" if column in right else "left")
    for row in rows:
        table.add_row(*(Text(str(cell)) for cell in row))
    out = io.StringIO()
    Console(width=WIDTH, file=out, color_system=None).print(table)
    return out.getvalue().rstrip("\n").splitlines()


def print_table(columns: Sequence[str], rows: Iterable[Sequence[object]], *, right: Collection[str] = ()) -> None:
    print("\n".join(table_lines(columns, rows, right=right)))
