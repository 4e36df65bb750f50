"""Writing kastore stores: the canonical layout, computed for all keys at once."""

from __future__ import annotations

import numpy as np

from .._binary import round_up
from .._keyed import Layout, Prepared, aligned, keyed_writers, running_starts
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


def _plan(prepared: Prepared) -> Layout:
    """Header bytes, descriptor table and keys of the canonical layout."""
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
    return header, table, b"".join(prepared.keys)


dump, dumps = keyed_writers(FORMAT_NAME, _plan, ALIGNMENT, DEFAULT_KEY_ENCODING)
