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
from .._keyed_tree import keyed_tree as _tree
from .._registry import FormatSpec
from ._errors import ERRORS as _ERRORS
from ._errors import NoStoreError, StoreClosedError
from ._map import sections as _sections
from ._protocol import demo, entries, info, open, validate
from ._protocol import save_model as _save
from ._reader import load, loads
from ._records import EXTENSION, FORMAT_NAME, MAGIC
from ._writer import dump, dumps

__all__ = [
    "load", "loads", "dump", "dumps", "Store", "ValueInfo", "NoStoreError", "StoreClosedError",
    "FORMAT_NAME", "open", "info", "validate", "entries", "demo",
]

# This format, as the registry and every view know it.
FORMAT = FormatSpec(FORMAT_NAME, MAGIC, (EXTENSION,), "mapping", "KAST draft layout: key -> 1-D array",
                    open=open, demo=demo, tree=_tree, sections=_sections, errors=_ERRORS, module=__name__,
                    save=_save)
