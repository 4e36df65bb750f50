"""The KAST draft layout (``.kast``, magic ``KAST``, version 1.0): string keys -> 1-D numpy arrays.

The same data model as kastore (the shared ``_keyed`` model: ten dtypes, the
``Store`` mapping, zero-copy loading from paths, concatenated stores in
streams) in the byte layout of the withdrawn first draft of the kastore
documentation: a 40-byte header, a keys table of 32-byte entries, a keys area
of NUL-terminated keys and 8-byte aligned arrays. Every byte and every point
the draft left open is in docs/formats/kast.md.
"""

from __future__ import annotations

from .._keyed import Store, ValueInfo
from ._errors import NoStoreError, StoreClosedError
from ._protocol import cat, demo, entries, info, open, validate
from ._reader import load, loads
from ._records import FORMAT_NAME
from ._writer import dump, dumps

__all__ = [
    "load", "loads", "dump", "dumps", "Store", "ValueInfo", "NoStoreError", "StoreClosedError",
    "FORMAT_NAME", "open", "info", "validate", "entries", "cat", "demo",
]
