"""Decoding part of one Blosc1 chunk: only the blocks that hold a byte range, one block at a time.

A chunk's header may claim up to 2 GiB; reading one element of it must not
decode them all. A Blosc1 chunk is a 16-byte header, a table of int32 block
starts, then each block compressed on its own, so one block can be decoded by
handing python-blosc a chunk of exactly that block: the same header fields
(codec, shuffle, typesize, block size) with ``nbytes`` = the block's size and a
one-entry start table. The last, shorter block of a chunk is never split into
per-byte streams; as a chunk of its own it is a full block, so the copy says
so with the "don't split" flag. Only ``blocksize`` bytes of scratch are held,
and a block larger than the ``chunk_bytes`` limit is refused.
"""

from __future__ import annotations

import struct
from typing import Any

import blosc
import numpy as np

from .. import limits
from ._errors import ERRORS
from ._records import BLOSC_HEADER, BLOSC_OVERHEAD, FLAG_DONT_SPLIT, FLAG_MEMCPYED, FORMAT_NAME

_BLOSC_ERRORS = (blosc.blosc_extension.error, ValueError, TypeError, OverflowError)
_START = struct.Struct("<i")


def _block_starts(compressed: memoryview, header: Any, what: str, position: int) -> np.ndarray:
    """The chunk's table of block starts, each checked to lie in the chunk after the table."""
    count = -(-header.nbytes // header.blocksize)
    table_end = BLOSC_OVERHEAD + 4 * count
    if table_end > header.cbytes:
        raise ERRORS.invalid(f"{what} block starts", position + BLOSC_OVERHEAD,
                             f"{count} int32 starts within the chunk's {header.cbytes} bytes", f"{table_end} bytes")
    starts = np.frombuffer(compressed, "<i4", count, BLOSC_OVERHEAD).astype(np.int64)
    wrong = np.flatnonzero((starts < table_end) | (starts >= header.cbytes))
    if len(wrong):
        raise ERRORS.invalid(f"{what} block start {int(wrong[0])}", position + BLOSC_OVERHEAD + 4 * int(wrong[0]),
                             f"{table_end}..{header.cbytes - 1}", int(starts[wrong[0]]))
    return starts


def _one_block_chunk(compressed: memoryview, header: Any, starts: np.ndarray, block: int) -> bytes:
    """A Blosc1 chunk holding just block ``block`` of ``compressed``."""
    size = min(header.blocksize, header.nbytes - block * header.blocksize)
    start = int(starts[block])
    later = starts[starts > start]
    payload = compressed[start:int(later.min()) if len(later) else header.cbytes]
    flags = header.flags | (FLAG_DONT_SPLIT if size < header.blocksize else 0)
    head = BLOSC_HEADER.pack(version=header.version, versionlz=header.versionlz, flags=flags,
                             typesize=header.typesize, nbytes=size, blocksize=size,
                             cbytes=BLOSC_OVERHEAD + 4 + len(payload))
    return b"".join((head, _START.pack(BLOSC_OVERHEAD + 4), payload))


def decode_range(compressed: memoryview, header: Any, low: int, high: int, out: np.ndarray | None, what: str,
                 position: int) -> None:
    """Decode bytes ``low..high`` of a Blosc1 chunk into ``out`` (``high - low`` bytes), block by block.

    With ``out=None`` every touched block is decoded and checked, and the bytes dropped (validation).
    """
    if high <= low:
        return
    if header.flags & FLAG_MEMCPYED:  # stored as is after the header
        if out is not None:
            out[:high - low] = np.frombuffer(compressed, np.uint8, high - low, BLOSC_OVERHEAD + low)
        return
    if header.blocksize == 0:
        raise ERRORS.invalid(f"{what} blosc header.blocksize", position + BLOSC_HEADER.offsets["blocksize"],
                             "a positive block size", 0)
    limits.check("chunk_bytes", min(header.blocksize, header.nbytes), f"{what} blosc block", format=FORMAT_NAME,
                 offset=position + BLOSC_HEADER.offsets["blocksize"])
    starts = _block_starts(compressed, header, what, position)
    scratch = np.empty(min(header.blocksize, header.nbytes), np.uint8)
    for block in range(low // header.blocksize, (high - 1) // header.blocksize + 1):
        begin = block * header.blocksize
        size = min(header.blocksize, header.nbytes - begin)
        direct = out is not None and low <= begin and begin + size <= high
        target = out[begin - low:] if direct else scratch  # type: ignore[index]  # direct implies out
        try:
            written = blosc.decompress_ptr(_one_block_chunk(compressed, header, starts, block), target.ctypes.data)
        except _BLOSC_ERRORS as error:
            raise ERRORS.invalid(f"{what} block {block}", position + BLOSC_OVERHEAD + 4 * block,
                                 "a decodable Blosc block", str(error)) from None
        if written != size:
            raise ERRORS.invalid(f"{what} block {block}", position + BLOSC_OVERHEAD + 4 * block,
                                 f"{size} decoded bytes", written)
        if out is not None and not direct:
            lo, hi = max(low, begin), min(high, begin + size)
            out[lo - low:hi - low] = scratch[lo - begin:hi - begin]
