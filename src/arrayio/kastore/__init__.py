"""kastore (file version 1.0): a store of string keys -> 1-D numpy arrays.

API-compatible with PyPI ``kastore`` 0.3.6 (``import arrayio.kastore as
kastore`` works), byte-identical output, zero-copy loading from paths, linear
cost in the number of keys, and errors that name the field, item and byte
offset. The byte layout and every decision are in docs/formats/kastore.md.
"""


from __future__ import annotations

from .._keyed import C_ENGINE, PY_ENGINE, Store, ValueInfo
from .._keyed_tree import keyed_tree as _tree
from .._registry import FormatSpec
from ._errors import ERRORS as _ERRORS
from ._errors import (
    FileFormatError,
    KastoreException,
    KeyDecodeError,
    NoStoreError,
    StoreClosedError,
    TruncatedFileError,
    VersionTooNewError,
    VersionTooOldError,
)
from ._map import sections as _sections
from ._protocol import demo, entries, info, open, validate
from ._protocol import save_model as _save
from ._reader import load, loads
from ._records import DEFAULT_KEY_ENCODING, EXTENSION, FORMAT_NAME, MAGIC
from ._writer import dump, dumps

# The kastore release whose API this module mirrors (arrayio's own version is arrayio.__version__).
__version__ = "0.3.6"

__all__ = [
    "load", "loads", "dump", "dumps", "Store", "ValueInfo",
    "KastoreException", "FileFormatError", "TruncatedFileError", "VersionTooOldError", "VersionTooNewError",
    "StoreClosedError", "NoStoreError", "KeyDecodeError", "PY_ENGINE", "C_ENGINE", "DEFAULT_KEY_ENCODING",
    "FORMAT_NAME", "open", "info", "validate", "entries", "demo",
]

# This format, as the registry and every view know it.
FORMAT = FormatSpec(FORMAT_NAME, MAGIC, (EXTENSION,), "mapping", "kastore 1.0: key -> 1-D array",
                    open=open, demo=demo, tree=_tree, sections=_sections, errors=_ERRORS, module=__name__,
                    save=_save)
