"""The byte map of a kastore file: header, item descriptors, keys, arrays, alignment padding, trailing bytes."""

from __future__ import annotations

from .._binary import Source
from .._keyed import TableFields, map_store
from ..bytemap import Collector, Section
from ._reader import KEYED
from ._records import HEADER, ITEM

_FIELDS = TableFields("num_items", "key_start", "key_len", "type", "array_start", "array_len")
_LABELS = ("{count} item descriptors", "{count} keys", "after header.file_size", "item descriptors")


def sections(source: Source) -> list[Section]:
    """Every part of the store in ``source`` that the reader can place; a stop marker where parsing failed."""
    return Collector(source).run(lambda found: map_store(found, KEYED, HEADER, ITEM, _FIELDS, _LABELS))
