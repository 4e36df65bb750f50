"""Small files that declare huge sizes, built byte by byte for the hostile-size tests."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from arrayio import bloscpack as blp
from arrayio.bloscpack._records import BLOSC_HEADER, HEADER

BLOCK = 1 << 16


def block_pattern(block: int = BLOCK) -> np.ndarray:
    """The bytes of every block of :func:`claiming_bloscpack`: 0, 1, ... 250, 0, 1, ..."""
    return (np.arange(block) % 251).astype(np.uint8)


def claiming_bloscpack(path: Path, claimed: int, block: int = BLOCK) -> Path:
    """A bloscpack byte stream of one chunk whose Blosc header claims ``claimed`` bytes (a multiple of
    ``block``): every entry of its block-start table points at one real compressed block, so the file
    is valid and decodes to ``block_pattern`` repeated, from about 4 bytes per block."""
    options = {"checksum": "None", "offsets": True, "max_app_chunks": 0}
    small = blp.pack_bytes_to_bytes(block_pattern(block).tobytes(), chunk_size=block, bloscpack_args=options)
    header = HEADER.unpack(small)
    position = HEADER.size + 8  # after the one offsets slot
    chunk = BLOSC_HEADER.unpack(small, position)
    start = struct.unpack_from("<i", small, position + BLOSC_HEADER.size)[0]
    payload = small[position + start:position + chunk.cbytes]
    count = claimed // block
    table_end = BLOSC_HEADER.size + 4 * count
    head = BLOSC_HEADER.pack(version=chunk.version, versionlz=chunk.versionlz, flags=chunk.flags,
                             typesize=chunk.typesize, nbytes=claimed, blocksize=block,
                             cbytes=table_end + len(payload))
    file_header = HEADER.pack(**{**header._asdict(), "chunk_size": claimed, "last_chunk": claimed})
    path.write_bytes(file_header + small[HEADER.size:position] + head + struct.pack(f"<{count}i", *[table_end] * count)
                     + payload)
    return path
