"""The byte map of a kastore file: header, item descriptors, keys, arrays, alignment padding, trailing bytes."""

from __future__ import annotations

from .._binary import Source
from .._keyed import DTYPES, map_store
from ..bytemap import Collector, Section
from ._reader import KEYED
from ._records import HEADER, ITEM


def sections(source: Source) -> list[Section]:
    """Every part of the store in ``source`` that the reader can place; a stop marker where parsing failed."""
    return Collector(source).run(_parse)


def _parse(found: Collector) -> None:
    labels = ("{count} item descriptors", "{count} keys", "after header.file_size")
    map_store(found, KEYED, ITEM.size, 0, labels, _descriptors_as_written)


def _descriptors_as_written(found: Collector) -> None:
    """Best effort for a store the reader rejects: the header, and whatever descriptors lie inside the file."""
    source = found.source
    header = HEADER.read(source, 0)
    found.add(0, HEADER.size, "header", "header")
    count = min(header.num_items, max(0, source.size - HEADER.size) // ITEM.size)
    items = ITEM.read_array(source, HEADER.size, count)
    found.add(HEADER.size, ITEM.size * count, "table", f"{count} of {header.num_items} item descriptors")
    for position, item in enumerate(items.tolist()):
        code, _, key_start, key_len, array_start, array_len, _ = item
        if key_start + key_len <= source.size:
            found.add(key_start, key_len, "keys", f"key {position}")
        if code < len(DTYPES) and array_start + array_len * DTYPES[code].itemsize <= source.size:
            found.add(array_start, array_len * DTYPES[code].itemsize, "array", f"array {position}")
