"""The pycauset container (``.pycauset``): one matrix payload plus append-only typed metadata.

Compatible both ways with pycauset 0.6.1 without its bugs: saves are atomic,
loads map the payload read-only, metadata updates are crash-consistent with
fsync barriers, and rows/cols always describe the stored payload. The byte
layout and every decision the upstream spec leaves open are in
docs/formats/pycauset.md.

    save(matrix, path, properties=..., metadata=...)   numpy 1-D/2-D or a packed layout
    load(path) -> Container                            .array .metadata .matrix_type ...
    update_metadata(path, changes)                     O(1), crash-safe
"""

from __future__ import annotations

from .._registry import FormatSpec
from ._codec import (
    MAX_BYTES_LENGTH,
    MAX_DEPTH,
    MAX_ENTRIES,
    MAX_STRING_BYTES,
    decode_metadata,
    encode_metadata,
)
from ._errors import ERRORS, ContainerClosedError
from ._errors import ERRORS as _ERRORS
from ._map import sections as _sections
from ._matrices import (
    UNPACK_LIMIT,
    PackedMatrix,
    antisymmetric,
    causal,
    diagonal,
    symmetric,
    triangular,
)
from ._protocol import demo, entries, info, open, validate
from ._reader import (
    Container,
    SlotSummary,
    load,
    read_typed_metadata,
    summarize_container,
)
from ._records import EXTENSION, FORMAT_NAME, MAGIC
from ._tree import tree as _tree
from ._writer import save, update_metadata
from ._writer import save_model as _save

__all__ = [
    "ERRORS",
    "FORMAT_NAME",
    "MAX_BYTES_LENGTH",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_STRING_BYTES",
    "UNPACK_LIMIT",
    "Container",
    "ContainerClosedError",
    "PackedMatrix",
    "SlotSummary",
    "antisymmetric",
    "causal",
    "decode_metadata",
    "demo",
    "diagonal",
    "encode_metadata",
    "entries",
    "info",
    "load",
    "open",
    "read_typed_metadata",
    "save",
    "summarize_container",
    "symmetric",
    "triangular",
    "update_metadata",
    "validate",
]

# This format, as the registry and every view know it.
FORMAT = FormatSpec(FORMAT_NAME, MAGIC, (EXTENSION,), "matrix", "pycauset container 1: one matrix + typed metadata",
                    open=open, demo=demo, tree=_tree, sections=_sections, errors=_ERRORS, module=__name__,
                    save=_save)
