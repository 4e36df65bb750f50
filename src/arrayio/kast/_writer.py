"""Writing KAST stores: the one canonical layout of a mapping."""

from __future__ import annotations

import numpy as np

from .. import _keyed as keyed
from .._binary import round_up
from ..errors import UnsupportedError
from ._records import (
    ALIGNMENT,
    DEFAULT_KEY_ENCODING,
    ENTRY,
    FORMAT_NAME,
    HEADER,
    KEYS_TABLE_OFFSET,
    MAGIC,
    U32_MAX,
    VERSION_MAJOR,
    VERSION_MINOR,
)


def _plan(prepared: keyed.Prepared) -> keyed.Layout:
    """Header bytes, keys table and keys area of ``prepared`` (checked for what KAST cannot hold)."""
    count = len(prepared)
    if count > U32_MAX:
        raise UnsupportedError(f"kast: {count} keys do not fit the u32 num_keys field")
    area = b"\x00".join(prepared.keys) + b"\x00" if count else b""
    if area.count(0) != count:
        culprit = next(key for key in prepared.keys if 0 in key)
        raise UnsupportedError(f"kast: key {culprit!r} contains a NUL byte; KAST keys are NUL-terminated")
    key_lengths = np.fromiter(map(len, prepared.keys), dtype=np.uint64, count=count)
    if count and int(key_lengths.max()) > U32_MAX:
        raise UnsupportedError(f"kast: a key of {int(key_lengths.max())} bytes does not fit the u32 key_length field")
    table_end = KEYS_TABLE_OFFSET + ENTRY.size * count
    data_offset = round_up(table_end + len(area), ALIGNMENT)
    # Every start is a multiple of 8, so each array moves the next start on by its size rounded up to 8.
    table = ENTRY.empty(count)
    table["key_length"] = key_lengths
    table["key_offset"] = keyed.running_starts(key_lengths + np.uint64(1), table_end)
    table["data_type"] = prepared.codes
    table["data_length"] = prepared.lengths
    table["data_offset"] = keyed.running_starts(keyed.aligned(prepared.nbytes, ALIGNMENT), data_offset)
    header = HEADER.pack(magic=MAGIC, version_major=VERSION_MAJOR, version_minor=VERSION_MINOR, flags=0,
                         num_keys=count, keys_table_offset=KEYS_TABLE_OFFSET, data_offset=data_offset)
    return header, table, area


dump, dumps = keyed.keyed_writers(FORMAT_NAME, _plan, ALIGNMENT, DEFAULT_KEY_ENCODING)
