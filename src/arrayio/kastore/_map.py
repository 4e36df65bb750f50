"""The byte map of a kastore file: header, item descriptors, keys, arrays, alignment padding, trailing bytes."""

from __future__ import annotations

import contextlib

from .._binary import Source
from .._keyed import DTYPES
from ..bytemap import Collector, Section
from ..errors import FormatError
from ._reader import KEYED
from ._records import DEFAULT_KEY_ENCODING, HEADER, ITEM


def sections(source: Source) -> list[Section]:
    """Every part of the store in ``source`` that the reader can place; a stop marker where parsing failed."""
    return Collector(source).run(_parse)


def _parse(found: Collector) -> None:
    source = found.source
    try:
        index = KEYED.parse(source, DEFAULT_KEY_ENCODING)
    except EOFError:
        return
    except FormatError:
        with contextlib.suppress(FormatError):
            _descriptors_as_written(found)
        raise
    count = len(index.keys)
    table_end = HEADER.size + ITEM.size * count
    keys_end = table_end + sum(len(key.encode(DEFAULT_KEY_ENCODING)) for key in index.keys)
    found.add(0, HEADER.size, "header", "header")
    found.add(HEADER.size, ITEM.size * count, "table", f"{count} item descriptors")
    found.add(table_end, keys_end - table_end, "keys", f"{count} keys")
    found.packed(keys_end, ((start, length * DTYPES[code].itemsize, key) for key, code, start, length
                            in zip(index.keys, index.types, index.starts, index.lengths)), "array")
    found.add(index.size, source.size - index.size, "trailing", "after header.file_size")


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
