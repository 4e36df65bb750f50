"""The registry protocol of bloscpack: open, info, validate, entries, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._readers import entries_of, info_of, problems_of
from .._sources import resolve
from ..errors import ArrayIOError, Problem
from ._reader import BloscpackFile, open_file
from ._writer import pack_ndarray_to_file


def open(path: Any, storage_options: dict | None = None) -> BloscpackFile:  # noqa: A001 - the protocol's name
    """Open a bloscpack file lazily (a path, bytes, URL or fsspec file): ``arr[a:b]`` fetches and decodes
    only the chunks holding rows a..b."""
    return open_file(resolve(path, storage_options) if storage_options else path)


def info(path: Any) -> dict:
    """Facts about a bloscpack file (header, metadata, first chunk), without decoding any data."""
    return info_of(open, path)


def validate(path: Any) -> list[Problem]:
    """Every problem found in the file, with every checksum verified and every chunk decoded (empty = valid)."""
    return problems_of(open, path)


def entries(path: Any) -> list[dict]:
    """One row per chunk: name ``chunkN``, byte offset, compressed and uncompressed sizes, codec."""
    return entries_of(open, path)


def demo(folder: Path) -> Path:
    """Write a small 2-D float64 array (4 chunks) to ``folder/demo.blp``, read it back, check it, return the path."""
    path = Path(folder) / "demo.blp"
    array = np.arange(512 * 8, dtype=np.float64).reshape(512, 8)
    pack_ndarray_to_file(array, path, chunk_size="8K")
    with open_file(path) as reader:
        if not (np.array_equal(reader.read(), array) and np.array_equal(reader[100:110], array[100:110])):
            raise ArrayIOError("bloscpack demo: the array read back differs from the one written")
    return path
