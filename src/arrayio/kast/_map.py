"""The byte map of a KAST file: header, keys table, NUL-terminated keys, arrays, padding, trailing bytes."""

from __future__ import annotations

from .._binary import Source
from .._keyed import DTYPES, map_store
from ..bytemap import Collector, Section
from ._reader import KEYED
from ._records import ENTRY, HEADER, KEYS_TABLE_OFFSET


def sections(source: Source) -> list[Section]:
    """Every part of the store in ``source`` that the reader can place; a stop marker where parsing failed."""
    return Collector(source).run(_parse)


def _parse(found: Collector) -> None:
    labels = ("keys table ({count} entries)", "{count} keys + NULs", "after the last array")
    map_store(found, KEYED, ENTRY.size, 1, labels, _table_as_written)


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
