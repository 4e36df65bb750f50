"""Writing kastore stores: the canonical layout, computed for all keys at once."""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any, BinaryIO

import numpy as np

from .._binary import Writer, round_up
from .._edge import open_output
from .._keyed import (
    PY_ENGINE,
    Prepared,
    aligned,
    check_engine,
    prepare,
    running_starts,
)
from ..errors import UnsupportedError
from ._records import (
    ALIGNMENT,
    DEFAULT_KEY_ENCODING,
    FORMAT_NAME,
    HEADER,
    ITEM,
    MAGIC,
    VERSION_MAJOR,
    VERSION_MINOR,
)


def _plan(prepared: Prepared) -> tuple[bytes, np.ndarray, int]:
    """Header bytes, descriptor table and total size of the canonical layout."""
    count = len(prepared)
    if count > 0xFFFFFFFF:
        raise UnsupportedError(f"kastore: {count} items do not fit the u32 num_items field")
    table = ITEM.empty(count)
    key_lengths = np.fromiter(map(len, prepared.keys), dtype=np.uint64, count=count)
    nbytes = prepared.nbytes
    table_end = HEADER.size + ITEM.size * count
    key_starts = running_starts(key_lengths, table_end)
    # Every start is a multiple of 8, so each array moves the next start on by its size rounded up to 8.
    array_starts = running_starts(aligned(nbytes, ALIGNMENT), round_up(table_end + int(key_lengths.sum()), ALIGNMENT))
    position = int(array_starts[-1] + nbytes[-1]) if count else table_end
    table["type"] = prepared.codes
    table["key_start"] = key_starts
    table["key_len"] = key_lengths
    table["array_start"] = array_starts
    table["array_len"] = prepared.lengths
    header = HEADER.pack(magic=MAGIC, version_major=VERSION_MAJOR, version_minor=VERSION_MINOR,
                         num_items=count, file_size=position)
    return header, table, position


def _write(stream: BinaryIO, prepared: Prepared) -> int:
    header, table, total = _plan(prepared)
    writer = Writer(stream)
    writer.write(header)
    writer.write(table)
    writer.write(b"".join(prepared.keys))
    writer.write_aligned_arrays(prepared.arrays, ALIGNMENT)
    return total



def dump(data: Mapping, file: Any, key_encoding: str = DEFAULT_KEY_ENCODING, engine: str = PY_ENGINE, *,
         storage_options: dict | None = None) -> None:
    """Write ``data`` (str -> 1-D array) to a path (atomically), URL, fd or binary file object.

    An existing file is replaced, as kastore does (``arrayio convert`` asks for ``--force`` instead);
    ``storage_options`` apply to URLs.
    """
    check_engine(engine)
    prepared = prepare(data, key_encoding, FORMAT_NAME)
    with open_output(file, storage_options) as stream:
        _write(stream, prepared)


def dumps(data: Mapping, key_encoding: str = DEFAULT_KEY_ENCODING) -> bytes:
    """The kastore bytes of ``data`` (str -> 1-D array)."""
    stream = io.BytesIO()
    _write(stream, prepare(data, key_encoding, FORMAT_NAME))
    return stream.getvalue()
