"""Choosing the row groups of a Parquet dataset a scan decodes, by their statistics.

A test gets a row group's :data:`Bounds` (each column's min and max, read when asked for) and says
whether the row group may hold rows wanted. It runs in Python: Arrow took milliseconds to check
an OR of a term per partition against each row group's statistics, the longest step of a sync
history lookup once the table held a few hundred row groups.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

# A row group's (min, max) of each column its statistics give both of; a column missing may hold anything.
Bounds = Mapping[str, tuple[Any, Any]]
# Whether a row group of these bounds may hold rows a scan wants.
RowGroupTest = Callable[[Bounds], bool]


def selected(dataset: Any, where: Any, test: RowGroupTest) -> Any:
    """``dataset`` (pyarrow) of the files ``where`` may match, each with the row groups ``test`` keeps."""
    import pyarrow.dataset as ds

    files = []
    for fragment in dataset.get_fragments(filter=where):
        metadata = fragment.metadata
        columns_at = {metadata.schema.column(i).path: i for i in range(metadata.num_columns)}
        kept = [i for i in range(metadata.num_row_groups) if test(RowGroupBounds(metadata.row_group(i), columns_at))]
        if kept:
            files.append(fragment.subset(row_group_ids=kept))
    return ds.FileSystemDataset(files, dataset.schema, dataset.format, dataset.filesystem)


class RowGroupBounds(Mapping[str, tuple[Any, Any]]):
    """A row group's :data:`Bounds`, each column's statistics read when asked for (a test asks
    for two or three of them)."""

    def __init__(self, metadata: Any, columns_at: Mapping[str, int]) -> None:
        self._metadata, self._columns_at = metadata, columns_at  # pyarrow's RowGroupMetaData

    def __getitem__(self, column: str) -> tuple[Any, Any]:
        if column not in self._columns_at:
            raise KeyError(column)
        stats = self._metadata.column(self._columns_at[column]).statistics
        if stats is None or not stats.has_min_max or stats.min is None or stats.max is None:
            raise KeyError(column)
        return stats.min, stats.max

    def __iter__(self) -> Iterator[str]:
        return (column for column in self._columns_at if column in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)
