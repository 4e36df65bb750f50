"""tszip (``.tsz``): a tree sequence's columns as Zarr v2 arrays in a zip, as PyPI ``tszip`` writes them.

``load(path_or_url)`` gives a read-only mapping of column path -> decoded
1-D array (chunks decoded on access; a URL is read in ranges); ``dump``
writes columns tszip reads. What the columns mean (quantised coordinates,
text as bytes) is tree-sequence knowledge and lives in :mod:`arrayio.tskit`,
which converts ``.trees`` <-> ``.tsz``. The layout: docs/formats/tszip.md.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._readers import entries_of, info_of, problems_of
from .._text import value_lines
from ..errors import Problem
from ._errors import ERRORS, TszipClosedError
from ._reader import DEFAULT_EXPANSION, Column, TszipFile, load
from ._records import EXTENSION, FORMAT_NAME, FORMAT_VERSION, MAGIC
from ._writer import DEFAULT_CHUNK, Array, dump

__all__ = [
    "FORMAT_NAME", "FORMAT_VERSION", "EXTENSION", "MAGIC", "ERRORS", "DEFAULT_CHUNK", "DEFAULT_EXPANSION",
    "Array", "Column", "TszipFile", "TszipClosedError", "load", "dump",
    "open", "info", "validate", "entries", "cat",
]


def open(target: Any, storage_options: dict | None = None) -> TszipFile:  # noqa: A001 - the protocol name
    """The reader of a tszip file (a path, bytes, URL or file object)."""
    return load(target, storage_options)


def info(target: Any) -> dict[str, Any]:
    """Root attributes and one row per column: dtype, length, codecs, decoded and stored bytes."""
    return info_of(open, target)


def validate(target: Any) -> list[Problem]:
    """Every problem: the zip directory, members' CRC-32s, column metadata, every chunk decoded."""
    return problems_of(open, target)


def entries(target: Any) -> list[dict[str, Any]]:
    """One row per column, for ``arrayio ls``."""
    return entries_of(open, target)


def cat(target: Any, name: str, numbers: bool = False) -> Iterator[str]:
    """The values of column ``name``, one per line, chunk by chunk; a byte column holding text prints as its
    lines (read whole: text columns are schemas and short strings) unless ``numbers``."""
    with open(target) as reader:
        column = reader.columns[name]
        if column.dtype.itemsize == 1 and column.dtype.kind in "iu" and not numbers:
            yield from value_lines(reader[name])
            return
        for index in range(column.nchunks):
            yield from value_lines(reader.read_chunk(name, index), numbers=True)
