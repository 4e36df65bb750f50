"""The registry protocol of bloscpack: open, info, validate, entries, cat, demo."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .._readers import entries_of, info_of, problems_of
from .._sources import resolve
from .._text import TEXT_LIMIT, value_lines
from ..errors import ArrayIOError, Problem
from ._errors import ERRORS
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


def cat(path: Any, name: str, numbers: bool = False) -> Iterator[str]:
    """Lines for ``arrayio cat``: ``data`` prints every value (storage order), ``chunkN`` one chunk's
    values, ``metadata`` the JSON metadata; a byte stream that is text prints as text unless ``numbers``."""
    with open_file(path) as reader:
        if name == "metadata":
            yield json.dumps(reader.metadata, indent=2, ensure_ascii=False)
            return
        if name.startswith("chunk") and name[5:].isdigit():
            index = int(name[5:])
            if not 0 <= index < reader.nchunks:
                raise KeyError(name)
            chunk = reader.read_chunk(index)
            if len(chunk) % reader.dtype.itemsize:
                raise ERRORS.invalid(f"chunk {index}", reader.chunk_location(index)[0],
                                     f"a whole number of {reader.dtype.itemsize}-byte items", f"{len(chunk)} bytes")
            yield from value_lines(chunk.view(reader.dtype), numbers)
            return
        if name != "data":
            raise KeyError(name)
        small_vector = len(reader.shape) == 1 and reader.nbytes is not None and reader.nbytes <= TEXT_LIMIT
        if reader.order != "C" or not reader.shape or small_vector:  # a small vector may be text: read it whole
            yield from value_lines(reader.read(), numbers)
            return
        per_row = max(1, math.prod(reader.shape[1:]))
        step = max(1, (1 << 20) // per_row)
        for low in range(0, reader.shape[0], step):
            yield from value_lines(reader[low:low + step])


def demo(folder: Path) -> Path:
    """Write a small 2-D float64 array (4 chunks) to ``folder/demo.blp``, read it back, check it, return the path."""
    path = Path(folder) / "demo.blp"
    array = np.arange(512 * 8, dtype=np.float64).reshape(512, 8)
    pack_ndarray_to_file(array, path, chunk_size="8K")
    with open_file(path) as reader:
        if not (np.array_equal(reader.read(), array) and np.array_equal(reader[100:110], array[100:110])):
            raise ArrayIOError("bloscpack demo: the array read back differs from the one written")
    return path
