"""The byte map of a KAST file: header, keys table, NUL-terminated keys, arrays, padding, trailing bytes."""

from __future__ import annotations

import contextlib

from .._binary import Source
from .._keyed import DTYPES
from ..bytemap import Collector, Section
from ..errors import FormatError
from ._reader import KEYED
from ._records import DEFAULT_KEY_ENCODING, ENTRY, HEADER, KEYS_TABLE_OFFSET


def sections(source: Source) -> list[Section]:
    """Every part of the store in ``source`` that the reader can place; a stop marker where parsing failed."""
    return Collector(source).run(_parse)


def _parse(found: Collector) -> None:
    source = found.source
    try:
        index = KEYED.parse(source, DEFAULT_KEY_ENCODING)
    except FormatError:
        with contextlib.suppress(FormatError):
            _table_as_written(found)
        raise
    count = len(index.keys)
    table_end = KEYS_TABLE_OFFSET + ENTRY.size * count
    keys_end = table_end + sum(len(key.encode(DEFAULT_KEY_ENCODING)) + 1 for key in index.keys)
    found.add(0, HEADER.size, "header", "header")
    found.add(KEYS_TABLE_OFFSET, ENTRY.size * count, "table", f"keys table ({count} entries)")
    found.add(table_end, keys_end - table_end, "keys", f"{count} keys + NULs")
    found.packed(keys_end, ((start, length * DTYPES[code].itemsize, key) for key, code, start, length
                            in zip(index.keys, index.types, index.starts, index.lengths)), "array")
    found.add(index.size, source.size - index.size, "trailing", "after the last array")


def _table_as_written(found: Collector) -> None:
    """Best effort for a store the reader rejects: the header, and whatever entries lie inside the file."""
    source = found.source
    header = HEADER.read(source, 0)
    found.add(0, HEADER.size, "header", "header")
    count = min(header.num_keys, max(0, source.size - KEYS_TABLE_OFFSET) // ENTRY.size)
    entries = ENTRY.read_array(source, KEYS_TABLE_OFFSET, count)
    found.add(KEYS_TABLE_OFFSET, ENTRY.size * count, "table", f"{count} of {header.num_keys} keys table entries")
    for position, entry in enumerate(entries.tolist()):
        key_length, key_offset, code, data_length, data_offset = entry
        if key_offset + key_length + 1 <= source.size:
            found.add(key_offset, key_length + 1, "keys", f"key {position}")
        if code < len(DTYPES) and data_offset + data_length * DTYPES[code].itemsize <= source.size:
            found.add(data_offset, data_length * DTYPES[code].itemsize, "array", f"array {position}")
