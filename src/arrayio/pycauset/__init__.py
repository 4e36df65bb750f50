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

from ._codec import MAX_BYTES_LENGTH, MAX_DEPTH, MAX_ENTRIES, MAX_STRING_BYTES, decode_metadata, encode_metadata
from ._container import (
    Container,
    SlotSummary,
    load,
    read_typed_metadata,
    save,
    summarize_container,
    update_metadata,
)
from ._errors import ERRORS, FORMAT_NAME
from ._layouts import UNPACK_LIMIT, PackedMatrix, antisymmetric, causal, diagonal, symmetric, triangular
from ._protocol import cat, demo, entries, info, open, validate

__all__ = [
    "FORMAT_NAME",
    "ERRORS",
    "Container",
    "PackedMatrix",
    "SlotSummary",
    "save",
    "load",
    "open",
    "update_metadata",
    "summarize_container",
    "read_typed_metadata",
    "encode_metadata",
    "decode_metadata",
    "triangular",
    "causal",
    "symmetric",
    "antisymmetric",
    "diagonal",
    "info",
    "validate",
    "entries",
    "cat",
    "demo",
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "MAX_STRING_BYTES",
    "MAX_BYTES_LENGTH",
    "UNPACK_LIMIT",
]
