"""Leaving bloscpack: its files as python-blosc2 NDArrays (``.b2nd``) or super-chunks (``.b2frame``), and back.

bloscpack was archived in March 2025 and its maintainers point to python-blosc2.
:func:`from_bloscpack` keeps dtype, shape, the memory order (``vlmeta["order"]``),
the bloscpack metadata (``vlmeta["bloscpack"]``), the chunking (a ``.b2frame``
has the same chunks; a ``.b2nd`` chunk holds the whole rows, or columns for
Fortran order, of one bloscpack chunk) and the codec settings the Blosc1 headers
record (codec, shuffle, typesize, block size). It works over the public reader
of :mod:`arrayio.bloscpack`, one chunk in memory at a time.

Chunks are carried over where their codec can be: each Blosc1 chunk becomes a
Blosc2 chunk holding the same compressed streams (:func:`_as_blosc2_chunk`),
for every ``.b2frame`` chunk and for the full chunks of a C-order ``.b2nd``
whose chunks and Blosc blocks are whole rows (an NDArray's blocks are
sub-arrays); the rest is decoded and encoded again. Appending Blosc1 chunks
unchanged is no option: a frame reads byte 31 of each chunk as Blosc2's
special-value flags, compressed data in a Blosc1 chunk, so about 3 in 8 would
be stored as zeros, NaNs or uninitialised with their bytes dropped
(docs/migrating-from-bloscpack.md; tests/bloscpack/test_blosc2_migration.py
keeps the proof). Blosc1 headers do not record the
compression level, so ``clevel`` says it (default 5). ``pip install "arrayio[blosc2]"``.
"""

from __future__ import annotations

import math
import os
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from . import bloscpack
from ._binary import atomic_path
from ._optional import require
from ._sources import is_url
from ._temporary import spool_array
from .errors import UnsupportedError

__all__ = ["EXTENSIONS", "from_bloscpack", "to_bloscpack"]

EXTENSIONS = {".b2nd": "ndarray", ".b2frame": "frame"}
# Blosc1 codec names (a chunk header's codec) -> python-blosc2's; lz4hc writes lz4 streams, snappy is gone.
_CODECS = {"blosclz": "BLOSCLZ", "lz4": "LZ4", "zlib": "ZLIB", "zstd": "ZSTD", "snappy": "LZ4"}
_BLOSC1_NAMES = {"BLOSCLZ": "blosclz", "LZ4": "lz4", "LZ4HC": "lz4hc", "ZLIB": "zlib", "ZSTD": "zstd"}
Progress = Callable[[int], None]
# Blosc chunk headers (c-blosc2's README_CHUNK_FORMAT.rst): Blosc1's 16 bytes, version 2, and Blosc2's
# extended 32 bytes; the flag bits; the codec numbers whose streams c-blosc2 decodes (blosclz, lz4 also
# for lz4hc, zlib, zstd; 2 was snappy).
_BLOSC1_HEADER, _BLOSC1_VERSION, _BLOSC2_HEADER, _BLOSC2_VERSION = 16, 2, 32, 5
_BYTE_SHUFFLE, _MEMCPYED, _BIT_SHUFFLE = 0x01, 0x02, 0x04
_CARRIED_CODECS = frozenset({0, 1, 3, 4})


def _kind(target: Any, kind: str | None) -> str:
    if kind is not None:
        if kind not in EXTENSIONS.values():
            raise UnsupportedError(f"blosc2: kind must be one of {', '.join(EXTENSIONS.values())}, not {kind!r}")
        return kind
    suffix = os.path.splitext(os.fspath(target))[1].lower()
    if suffix not in EXTENSIONS:
        raise UnsupportedError(f"blosc2: {os.fspath(target)} ends neither in .b2nd nor in .b2frame; say kind=")
    return EXTENSIONS[suffix]


def _cparams(reader: Any, clevel: int) -> dict[str, Any]:
    """The first chunk's codec, shuffle and block size, and the file's typesize, as python-blosc2 cparams."""
    blosc2 = require("blosc2", "Blosc2 conversions")

    cparams: dict[str, Any] = {"clevel": clevel, "typesize": max(1, reader.header.typesize)}
    if reader.nchunks == 0:
        return cparams
    _position, header = reader.chunk_location(0)
    flags = bloscpack.decode_blosc_flags(header.flags)
    cparams["codec"] = blosc2.Codec[_CODECS.get(flags["codec"], "ZSTD")]
    cparams["filters"] = [blosc2.Filter.BITSHUFFLE if flags["bit_shuffle"] else
                          blosc2.Filter.SHUFFLE if flags["byte_shuffle"] else blosc2.Filter.NOFILTER]
    return cparams


def _slabs(reader: Any, axis: int, per_slab: int, progress: Progress) -> Iterator[tuple[int, np.ndarray]]:
    """(first index along ``axis``, decoded slab of ``per_slab`` entries) in file order, from the chunk stream:
    bloscpack chunks are byte ranges, so bytes are carried over from one chunk to the next."""
    shape = reader.shape
    rest = [n for position, n in enumerate(shape) if position != axis % len(shape)]
    slab_bytes = math.prod(rest) * reader.dtype.itemsize
    carry = np.empty(0, np.uint8)
    start = 0
    for chunk in reader.iter_chunks():
        progress(len(chunk))
        carry = np.concatenate((carry, chunk)) if carry.size else chunk
        count = carry.size // slab_bytes // per_slab * per_slab if slab_bytes else 0
        if count:
            yield start, _slab(carry[:count * slab_bytes], reader, axis, count)
            carry = carry[count * slab_bytes:].copy()
            start += count
    if carry.size:
        yield start, _slab(carry, reader, axis, carry.size // slab_bytes)


def _slab(data: np.ndarray, reader: Any, axis: int, count: int) -> np.ndarray:
    shape = list(reader.shape)
    shape[axis] = count
    return data.view(reader.dtype).reshape(shape, order=reader.order)


def _ndarray(reader: Any, path: str, cparams: dict[str, Any], progress: Progress) -> None:
    blosc2 = require("blosc2", "Blosc2 conversions")

    shape, itemsize = reader.shape, reader.dtype.itemsize
    axis = -1 if reader.order == "F" else 0
    chunk_size = reader.header.chunk_size if reader.nchunks else 1
    if not shape:
        array = blosc2.asarray(np.asarray(reader.read()), urlpath=path, mode="w", cparams=cparams)
    else:
        across = math.prod(n for position, n in enumerate(shape) if position != axis % len(shape)) * itemsize
        per_chunk = max(1, min(shape[axis], chunk_size // across if across else shape[axis]))
        chunks = list(shape)
        chunks[axis] = max(1, per_chunk)
        block_rows = _carried_block_rows(reader, across) if axis == 0 else None
        blocks = None if block_rows is None else (block_rows, *shape[1:])
        array = blosc2.empty(shape, dtype=reader.dtype, chunks=tuple(chunks), blocks=blocks, urlpath=path, mode="w",
                             cparams={key: value for key, value in cparams.items() if key != "blocksize"})
        if block_rows is not None:
            _carry_rows(reader, array, per_chunk, block_rows * across, progress)
        else:
            for start, slab in _slabs(reader, axis, per_chunk, progress):
                region = [slice(None)] * len(shape)
                region[axis] = slice(start, start + slab.shape[axis])
                array[tuple(region)] = np.ascontiguousarray(slab)  # one slab: python-blosc2 takes C order only
    array.schunk.vlmeta["order"] = reader.order
    if reader.metadata is not None:
        array.schunk.vlmeta["bloscpack"] = reader.metadata


def _carried_block_rows(reader: Any, row_bytes: int) -> int | None:
    """Rows in a Blosc2 block when the NDArray's chunks can be the .blp's chunks carried over (C order, every
    bloscpack chunk whole rows, the first chunk's Blosc blocks whole rows too: a 1-D array always, n-D rows
    of power-of-two bytes), else None."""
    if reader.order != "C" or reader.nchunks == 0 or row_bytes <= 0 or reader.header.chunk_size % row_bytes:
        return None
    _position, header = reader.chunk_location(0)
    if header.blocksize <= 0 or header.blocksize % row_bytes or header.blocksize > reader.header.chunk_size:
        return None
    return int(header.blocksize // row_bytes)


def _carry_rows(reader: Any, array: Any, per_chunk: int, blocksize: int, progress: Progress) -> None:
    """Each full bloscpack chunk in Blosc blocks of ``blocksize`` bytes becomes the NDArray's chunk of the
    same rows, its streams carried over (_as_blosc2_chunk); the others (the short last one) are decoded and
    written, which python-blosc2 pads and encodes."""
    full = per_chunk * math.prod(reader.shape[1:]) * reader.dtype.itemsize
    for index in range(reader.nchunks):
        _position, header = reader.chunk_location(index)
        carried = _as_blosc2_chunk(reader.compressed_chunk(index)) \
            if header.nbytes == full and header.blocksize == blocksize else None
        if carried is not None:
            array.schunk.update_chunk(index, carried)
        else:
            rows = reader.read_chunk(index).view(reader.dtype).reshape(-1, *reader.shape[1:])
            array[index * per_chunk:index * per_chunk + rows.shape[0]] = rows
        progress(int(header.nbytes))


def _as_blosc2_chunk(chunk: memoryview) -> bytes | None:
    """A Blosc1 chunk re-framed as a Blosc2 chunk holding the same compressed streams (the codec is not run),
    or None where c-blosc2 could not decode them (another format version, snappy): the 32-byte extended
    header (both shuffle bits set is what says "extended"; the shuffle moves to the last filter slot; the
    Blosc2 flags byte, which frames read for special values, is zero) and the block starts moved by the 16
    bytes the header grew. Appended unchanged, a Blosc1 chunk is misread by frames
    (docs/migrating-from-bloscpack.md)."""
    flags = chunk[2]
    both = _BYTE_SHUFFLE | _BIT_SHUFFLE
    if len(chunk) < _BLOSC1_HEADER or chunk[0] != _BLOSC1_VERSION or flags >> 5 not in _CARRIED_CODECS \
            or flags & both == both:
        return None
    nbytes, blocksize, cbytes = struct.unpack_from("<iii", chunk, 4)
    shuffle = 1 if flags & _BYTE_SHUFFLE else 2 if flags & _BIT_SHUFFLE else 0
    header = struct.pack("<4B3i6B2B6B2B", _BLOSC2_VERSION, chunk[1], flags | both, chunk[3], nbytes, blocksize,
                         cbytes + _BLOSC2_HEADER - _BLOSC1_HEADER, 0, 0, 0, 0, 0, shuffle, 0, 0, *bytes(6), 0, 0)
    if flags & _MEMCPYED or nbytes == 0 or blocksize <= 0:
        return header + bytes(chunk[_BLOSC1_HEADER:])
    blocks = -(-nbytes // blocksize)
    if _BLOSC1_HEADER + 4 * blocks > len(chunk):
        return None
    starts = np.frombuffer(chunk, "<i4", blocks, _BLOSC1_HEADER).astype("<i4") + (_BLOSC2_HEADER - _BLOSC1_HEADER)
    return header + starts.tobytes() + bytes(chunk[_BLOSC1_HEADER + 4 * blocks:])


def _frame(reader: Any, path: str, cparams: dict[str, Any], progress: Progress) -> None:
    """The chunks of ``reader`` as a super-chunk frame: each Blosc1 chunk re-framed as a Blosc2 one, its
    compressed streams copied (decoded and encoded again only where they cannot be carried)."""
    blosc2 = require("blosc2", "Blosc2 conversions")

    chunk_size = reader.header.chunk_size if reader.nchunks else 1 << 20
    frame = blosc2.SChunk(chunksize=chunk_size, urlpath=path, mode="w", contiguous=True, cparams=cparams)
    for index in range(reader.nchunks):
        carried = _as_blosc2_chunk(reader.compressed_chunk(index))
        if carried is None:
            frame.append_data(reader.read_chunk(index))
        else:
            frame.append_chunk(carried)
        progress(int(reader.starts[index + 1] - reader.starts[index]))
    if reader.metadata is not None:
        frame.vlmeta["bloscpack"] = reader.metadata


def from_bloscpack(source: Any, target: Any, storage_options: dict | None = None, progress: Progress | None = None,
                   *, kind: str | None = None, clevel: int = 5) -> str:
    """Write the bloscpack file ``source`` (a path or URL) as a Blosc2 ``.b2nd`` NDArray or ``.b2frame``
    super-chunk at ``target`` (``kind`` "ndarray" or "frame" when the extension does not say); returns the kind."""
    chosen = _kind(target, kind)
    report = progress or (lambda nbytes: None)
    with bloscpack.open(source, storage_options) as reader:
        if chosen == "ndarray" and not reader.is_numpy:
            raise UnsupportedError(f"blosc2: {reader.name} holds bytes, not an ndarray; write a .b2frame")
        if reader.is_numpy and reader.dtype.hasobject:
            raise UnsupportedError(f"blosc2: dtype {reader.dtype} cannot be stored")
        cparams = _cparams(reader, clevel)
        with atomic_path(target) as path:
            (_ndarray if chosen == "ndarray" else _frame)(reader, path, cparams, report)
    return chosen


# --------------------------------------------------------------------------- back to bloscpack

def _blosc_args(cparams: Any, typesize: int) -> dict[str, Any]:
    blosc2 = require("blosc2", "Blosc2 conversions")

    codec = getattr(cparams, "codec", blosc2.Codec.ZSTD)
    filters = list(getattr(cparams, "filters", []))
    shuffle = 2 if blosc2.Filter.BITSHUFFLE in filters else 1 if blosc2.Filter.SHUFFLE in filters else 0
    return {"typesize": max(1, min(typesize, 255)), "clevel": int(getattr(cparams, "clevel", 5)),
            "shuffle": shuffle, "cname": _BLOSC1_NAMES.get(codec.name, "zstd")}


def to_bloscpack(source: Any, target: Any, storage_options: dict | None = None, progress: Progress | None = None,
                 *, chunk_size: int | None = None) -> str:
    """Write a python-blosc2 ``.b2nd`` NDArray or ``.b2frame`` super-chunk (a local path: python-blosc2 opens it)
    as the bloscpack file ``target``, one Blosc2 chunk at a time through a spool map; returns the kind read."""
    blosc2 = require("blosc2", "Blosc2 conversions")

    if storage_options or is_url(source):
        raise UnsupportedError(f"blosc2: {source} must be a local path (python-blosc2 opens files itself)")
    report = progress or (lambda nbytes: None)
    opened = blosc2.open(os.fspath(source), mode="r")
    folder = Path(os.fspath(target)).resolve().parent
    folder.mkdir(parents=True, exist_ok=True)
    if isinstance(opened, blosc2.NDArray):
        schunk = opened.schunk
        order = schunk.vlmeta["order"] if "order" in schunk.vlmeta else "C"
        shape, dtype = tuple(opened.shape), np.dtype(opened.dtype)
        spool = spool_array(folder, shape, dtype, "F" if order == "F" else "C")
        for info in opened.iterchunks_info():
            region = tuple(slice(c * n, min((c + 1) * n, s))
                           for c, n, s in zip(info.coords, opened.chunks, shape))
            block = opened[region] if shape else opened[()]
            spool[region] = block
            report(np.asarray(block).nbytes)
        size = chunk_size or max(dtype.itemsize, schunk.chunksize // dtype.itemsize * dtype.itemsize)
        bloscpack.pack_ndarray_to_file(spool, target, chunk_size=size,
                                       blosc_args=_blosc_args(schunk.cparams, dtype.itemsize))
        return "ndarray"
    schunk = opened
    metadata = schunk.vlmeta["bloscpack"] if "bloscpack" in schunk.vlmeta else None
    spool = spool_array(folder, (schunk.nbytes,), np.uint8)
    position = 0
    for index in range(schunk.nchunks):
        data = np.frombuffer(schunk.decompress_chunk(index), np.uint8)
        spool[position:position + data.size] = data
        position += data.size
        report(data.size)
    if metadata is not None and metadata.get("container") == "numpy":
        raise UnsupportedError("blosc2: this frame holds an ndarray's bytes; convert the .b2nd instead")
    bloscpack.pack_bytes_to_file(spool, target, chunk_size=chunk_size or schunk.chunksize, metadata=metadata,
                                 blosc_args=_blosc_args(schunk.cparams, schunk.typesize))
    return "frame"


# What arrayio.convert hands to this toolkit: (source, target extension) -> (function, the target's name; None:
# the arrayio format owning the target's extension).
CONVERSIONS: dict[tuple[str, str], tuple[str, str | None]] = {
    (".blp", ".b2nd"): ("from_bloscpack", "b2nd"),
    (".blp", ".b2frame"): ("from_bloscpack", "b2frame"),
    (".b2nd", ".blp"): ("to_bloscpack", None),
    (".b2frame", ".blp"): ("to_bloscpack", None),
}
