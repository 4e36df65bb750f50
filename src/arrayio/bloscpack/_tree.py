"""The tree of a bloscpack file: the one array ``array``, its chunks the file's Blosc chunks.

When the Blosc chunks hold whole rows of a C-order array (the usual case:
``pack_ndarray_to_file`` with a chunk size that is a multiple of the row
size, or a 1-D array), each model chunk is exactly one Blosc chunk and is
referencable: the Blosc1 frame at its offset decodes through Zarr's
``blosc`` codec to the chunk. Only the short last chunk is computed (its
frame decodes to less than a full chunk). Otherwise (Fortran order, chunks
straddling rows) chunks are row blocks of about one Blosc chunk, computed by
decoding the Blosc chunks they overlap.

Each Blosc chunk is decoded once per model chunk that covers it: a chunk is
never cut into parts that would each decode the whole Blosc chunk again.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .. import _tree as model
from .._binary import release_pages
from .._tree import Array, ChunkRef, Group, blosc_codecs, check_dtype, jsonable, rows_per_chunk
from ._reader import BloscpackFile


def _aligned_rows(reader: BloscpackFile, slab: int) -> int | None:
    """Rows per Blosc chunk when every chunk but the last holds the same whole number of rows."""
    sizes = np.diff(reader.starts)
    if not len(sizes) or slab == 0 or reader.order != "C" or len(reader.shape) == 0:
        return None
    first = int(sizes[0])
    if first == 0 or first % slab or np.any(sizes[:-1] != first) or int(sizes[-1]) > first:
        return None
    return first // slab


def tree(reader: BloscpackFile) -> Group:
    """The file as the group holding ``array``."""
    dtype = check_dtype(reader.dtype, "the bloscpack array")
    shape = tuple(reader.shape)
    fortran = reader.order == "F" and len(shape) > 1
    axis = len(shape) - 1 if fortran else 0
    slab = math.prod(shape[:-1] if fortran else shape[1:]) * dtype.itemsize  # bytes per index of `axis`
    aligned = _aligned_rows(reader, slab)
    if aligned is not None:
        step = aligned
    else:
        starts = reader.starts
        blosc_bytes = int(np.max(np.diff(starts), initial=1)) if len(starts) > 1 else 1
        step = min(rows_per_chunk(slab, min(max(blosc_bytes, 1), model.MAX_CHUNK_BYTES)), max(shape[axis], 1)) \
            if shape else 1
    chunks = tuple(max(step if index == axis else size, 1) for index, size in enumerate(shape))
    source = reader.source

    def span(coords: tuple[int, ...]) -> tuple[int, int]:
        if not shape:
            return 0, 1
        low = coords[axis] * step
        return low, min(low + step, shape[axis])

    def rows(low: int, high: int) -> np.ndarray:
        """Indices ``low..high`` of ``axis``: the Blosc chunks they touch fetched in one request, decoded into one
        array."""
        region = list(shape)
        if shape:
            region[axis] = high - low
        out = np.empty(math.prod(region) * reader.dtype.itemsize, dtype=np.uint8)
        reader._read_bytes(low * slab, high * slab, out)
        return out.view(reader.dtype).reshape(region, order="F" if fortran else "C")

    def read(coords: tuple[int, ...]) -> np.ndarray:
        return rows(*span(coords))

    def reference(coords: tuple[int, ...]) -> ChunkRef | None:
        index = coords[0]
        if (index + 1) * step > shape[0]:
            return None  # the short last frame decodes to less than a chunk
        return ChunkRef(*reader.chunk_span(index))

    def stored(coords: tuple[int, ...]) -> Any:
        return reader.compressed_chunk(coords[0])

    def release(coords: tuple[int, ...]) -> None:
        low, high = span(coords)
        if high <= low or slab == 0:
            return
        starts, positions = reader.starts, reader.positions
        first = int(np.searchsorted(starts, low * slab, side="right")) - 1
        last = int(np.searchsorted(starts, high * slab, side="left")) - 1
        end = int(positions[last + 1]) if last + 1 < len(positions) else source.size
        release_pages(source, int(positions[first]), end - int(positions[first]))

    metadata = reader.metadata if isinstance(reader.metadata, dict) else {"metadata": reader.metadata}
    attributes = {**jsonable(metadata), "order": reader.order}
    names = tuple(f"dim_{index}" for index in range(len(shape)))
    referencable = aligned is not None
    array = Array(shape, dtype, chunks, names, attributes, read,
                  reference=reference if referencable else None,
                  codecs=blosc_codecs(reader.dtype) if referencable else (),
                  stored=stored if referencable else None, release=release,
                  why_computed="the short last Blosc chunk decodes to less than a chunk" if referencable else
                  "its Blosc chunks are not whole chunks of rows (a chunk size that is not a multiple of the row "
                  "size, or Fortran order): a chunk needs bytes of two Blosc chunks",
                  read_rows=None if fortran or not shape else rows)
    return Group({"arrayio_format": reader.format}, {"array": array})
