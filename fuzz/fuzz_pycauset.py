"""Fuzz the pycauset container (.pycauset): detect, open, info, validate, entries, the matrix and the metadata."""

from __future__ import annotations

import io
import math

from _common import read_mapped

import arrayio
from arrayio import pycauset

FORMAT = "pycauset"

# Packed layouts (diagonal, identity, triangles, bits) unpack to n x n dense arrays: a tiny valid
# file may describe a huge matrix. Up to this size the harness unpacks it every way; above, it asks
# unpack() with this limit and expects its documented UnsupportedError ("over the limit").
UNPACK_BYTES = 64 << 20


def _read(container: pycauset.Container, path: str | None) -> None:
    """The matrix (packed, unpacked, with the view applied) and every metadata fact."""
    with container:
        _ = container.packed
        _ = (container.matrix_type, container.data_type, container.shape, container.is_transposed,
         container.is_conjugated, container.scalar, container.properties)
        repr(container)
        if math.prod(container.shape) * 16 <= UNPACK_BYTES:  # 16: the widest item (complex128)
            _ = container.array
            container.values()
            if path is not None:
                with pycauset.open(path) as reader:
                    for _ in reader.cat("matrix"):
                        pass
            return
        try:
            container.unpack(max_bytes=UNPACK_BYTES)
        except arrayio.UnsupportedError as error:
            if "over the limit" not in str(error):
                raise


def exercise(path: str, data: bytes) -> None:
    """Every public read path of the pycauset container over one input."""
    pycauset.summarize_container(path)
    if read_mapped(path, data, FORMAT, pycauset.load, lambda container: _read(container, path)):
        keys = [row["name"] for row in pycauset.entries(path) if row["name"].startswith("metadata.")]
        with pycauset.open(path) as reader:
            for name in ["metadata", *keys[:1]]:  # the whole tree, and one key's lookup
                for _ in reader.cat(name):
                    pass
    pycauset.read_typed_metadata(path)
    _read(pycauset.load(io.BytesIO(data)), None)
    _read(pycauset.load(data), None)
