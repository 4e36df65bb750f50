"""The tree of a pycauset container: the one array ``matrix`` with the values pycauset gives.

Dense payloads that are plain C-order rows (not transposed, conjugated or
scaled) are referencable row blocks of the payload; packed layouts (bits,
triangles, diagonals, identity, planar half-precision complex) are computed
row blocks that read only their rows' bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._binary import release_pages
from .._tree import Array, ChunkRef, Group, bytes_codecs, check_dtype, jsonable, rows_per_chunk
from ..errors import UnsupportedError
from ._matrices import DENSE, DIAGONAL, _row_offsets, dense_bit_stride


def tree(container: Any) -> Group:
    """The container as the group holding ``matrix``."""
    layout = container.layout
    shape = tuple(container.shape)
    if layout.opaque:
        raise UnsupportedError(f"arrayio: pycauset matrix_type {layout.matrix_type} keeps no matrix in the "
                               "payload; only its metadata can be read")
    conjugate = container.is_conjugated and layout.dtype.kind == "c"
    scalar = container.scalar
    probe = np.zeros(1, dtype=layout.dtype) * scalar if scalar != 1 else np.zeros(1, dtype=layout.dtype)
    dtype = check_dtype(probe.dtype, "the pycauset matrix")
    names = ("row",) if len(shape) == 1 else ("row", "column")
    attributes = {"metadata": jsonable(container.metadata), "active_slot": container.active_slot,
                  "generation": container.generation}
    source = container.source

    def finish(block: np.ndarray) -> np.ndarray:
        if conjugate:
            block = np.conj(block)
        return block * scalar if scalar != 1 else block

    if layout.matrix_type in ("SYMMETRIC", "ANTISYMMETRIC"):
        # A row of these needs the column of every row above it: unpacked once, as pycauset does.
        row_bytes = (shape[1] if len(shape) > 1 else 1) * dtype.itemsize
        step = min(rows_per_chunk(row_bytes), max(shape[0], 1))
        chunks = (step,) + tuple(max(size, 1) for size in shape[1:])
        values: list[np.ndarray] = []

        def read_unpacked(coords: tuple[int, ...]) -> np.ndarray:
            if not values:
                values.append(container.values())
            return values[0][coords[0] * step:(coords[0] + 1) * step]

        array = Array(shape, dtype, chunks, names, attributes, read_unpacked,
                      why_computed=f"a packed {layout.matrix_type} triangle: each row needs the rows above it")
        return Group({"arrayio_format": container.format}, {"matrix": array})

    def payload(offset: int, length: int) -> np.ndarray:
        return np.frombuffer(source.view(container.payload_offset + offset, length, "matrix payload"), np.uint8)

    stored_row = (1 if layout.is_vector else layout.cols) * layout.dtype.itemsize  # unpacked bytes per stored row
    step = min(rows_per_chunk(stored_row), max(layout.rows, 1))
    transposed = layout.is_transposed and not layout.is_vector
    # Stored rows run along the last axis of a transposed matrix and of a vector read as a (1, n) row.
    axis = len(shape) - 1 if transposed or layout.is_vector else 0
    chunks = tuple(step if index == axis else max(size, 1) for index, size in enumerate(shape))

    def stored_span(coords: tuple[int, ...]) -> tuple[int, int]:
        low = coords[axis] * step
        return low, min(low + step, layout.rows)

    def extent(coords: tuple[int, ...]) -> tuple[int, int]:
        low, high = stored_span(coords)
        return container.payload_offset + low * stored_row, (high - low) * stored_row

    def reference(coords: tuple[int, ...]) -> ChunkRef | None:
        # A short last block is referenced at full size while the file goes on after it (the slots'
        # metadata follows the payload): a reader keeps only the part inside the array.
        start = container.payload_offset + stored_span(coords)[0] * stored_row
        full = step * stored_row
        return ChunkRef(start, full) if start + full <= source.size else None

    def release(coords: tuple[int, ...]) -> None:
        release_pages(source, *extent(coords))

    def read(coords: tuple[int, ...]) -> np.ndarray:
        low, high = stored_span(coords)
        if layout.zero_copy:
            block = payload(low * stored_row, (high - low) * stored_row).view(layout.dtype)
        else:
            block = _packed_rows(layout, payload, low, high)
        block = block.reshape(shape[:-1] + (-1,)) if layout.is_vector else block.reshape(-1, layout.cols)
        return finish(block.T if transposed else block)

    plain = layout.zero_copy and not transposed and not conjugate and scalar == 1
    array = Array(shape, dtype, chunks, names, attributes, read, reference=reference if plain else None,
                  codecs=bytes_codecs(layout.dtype) if plain else (), release=release if layout.zero_copy else None,
                  why_computed="a packed pycauset layout (bits, triangle, diagonal), or a transposed, conjugated or "
                  "scaled view: the values are not the stored bytes")
    return Group({"arrayio_format": container.format}, {"matrix": array})


def _packed_rows(layout: Any, payload: Callable[[int, int], np.ndarray], low: int, high: int) -> np.ndarray:
    """Stored rows ``low..high`` of a packed pycauset payload, unpacked (elements for vectors).

    Reads only those rows' bytes: bit rows of the dense stride, triangle rows from the
    row offsets, diagonal values, planar half-precision complex halves.
    """
    rows, cols, count = layout.rows, layout.cols, high - low
    if layout.matrix_type == "IDENTITY":
        block = np.zeros((count, cols), dtype=layout.dtype)
        diagonal = np.arange(low, min(high, cols))
        block[diagonal - low, diagonal] = 1
        return block
    if layout.kind == DIAGONAL:
        block = np.zeros((count, rows), dtype=layout.dtype)
        block[np.arange(count), np.arange(low, high)] = payload(low * 8, count * 8).view("<f8")
        return block
    per_row = 1 if layout.is_vector else cols
    if layout.data_type == "COMPLEX_FLOAT16":  # all real halves, then all imaginary halves
        real = payload(low * per_row * 2, count * per_row * 2).view("<f2").astype(np.float32)
        imaginary = payload((rows * per_row + low * per_row) * 2, count * per_row * 2).view("<f2")
        return (real + 1j * imaginary.astype(np.float32)).astype(np.complex64)
    if layout.kind == DENSE:  # bits
        if layout.is_vector:
            first = low // 8
            bits = np.unpackbits(payload(first, -(-high // 8) - first), bitorder="little")
            return bits[low - first * 8:high - first * 8].astype(bool)
        stride = dense_bit_stride(cols)
        packed = payload(low * stride, count * stride).reshape(count, stride)[:, :-(-cols // 8)]
        return np.unpackbits(packed, axis=1, bitorder="little")[:, :cols].astype(bool)
    _, starts = _row_offsets(rows, layout.data_type, layout.diagonal)
    begin = int(starts[low])
    end = int(starts[high]) if high < rows else layout.nbytes()
    return layout.triangle_rows(payload(begin, end - begin), low, high)
