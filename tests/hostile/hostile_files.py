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


def zeros_npz(path: Path, name: str, shape: tuple[int, ...], dtype: str = "<f8", data_bytes: int | None = None) -> Path:
    """An .npz whose one member holds ``shape`` zeros (or only ``data_bytes`` of them), deflated about
    1000:1 without ever holding them: one byte-aligned deflate block of 1 MiB of zeros, repeated (each
    is independent after a full flush)."""
    import zipfile
    import zlib

    header = io_npy_header(shape, dtype)
    if data_bytes is None:
        data_bytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    step = 1 << 20
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    head_block = compressor.compress(header) + compressor.flush(zlib.Z_FULL_FLUSH)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros_block = compressor.compress(bytes(step)) + compressor.flush(zlib.Z_FULL_FLUSH)
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail_block = compressor.compress(bytes(data_bytes % step)) + compressor.flush(zlib.Z_FINISH)
    crc, zeros = zlib.crc32(header), bytes(step)
    for _ in range(data_bytes // step):
        crc = zlib.crc32(zeros, crc)
    crc = zlib.crc32(bytes(data_bytes % step), crc)
    stream = head_block + zeros_block * (data_bytes // step) + tail_block
    size = len(header) + data_bytes
    member = (name + ".npy").encode()
    local = struct.pack("<4s5H3I2H", b"PK\x03\x04", 20, 0, zipfile.ZIP_DEFLATED, 0, 0, crc, len(stream), size,
                        len(member), 0) + member
    central = struct.pack("<4s6H3I5H2I", b"PK\x01\x02", 20, 20, 0, zipfile.ZIP_DEFLATED, 0, 0, crc, len(stream), size,
                          len(member), 0, 0, 0, 0, 0, 0) + member
    end = struct.pack("<4s4H2IH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(stream), 0)
    path.write_bytes(local + stream + central + end)
    return path


def io_npy_header(shape: tuple[int, ...], dtype: str) -> bytes:
    """The .npy magic and header of a C-order array."""
    import io

    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, {"descr": dtype, "fortran_order": False, "shape": shape})
    return out.getvalue()
