"""The byte map of a KAST file: header, keys table, NUL-terminated keys, arrays, padding, trailing bytes."""

from __future__ import annotations

from .._binary import Source
from .._keyed import TableFields, map_store
from ..bytemap import Collector, Section
from ._reader import KEYED
from ._records import ENTRY, HEADER

_FIELDS = TableFields("num_keys", "key_offset", "key_length", "data_type", "data_offset", "data_length",
                      key_terminator=1)
_LABELS = ("keys table ({count} entries)", "{count} keys + NULs", "after the last array", "keys table entries")


def sections(source: Source) -> list[Section]:
    """Every part of the store in ``source`` that the reader can place; a stop marker where parsing failed."""
    return Collector(source).run(lambda found: map_store(found, KEYED, HEADER, ENTRY, _FIELDS, _LABELS))
