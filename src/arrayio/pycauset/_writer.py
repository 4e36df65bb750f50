"""Writing the container: new files through a temporary file and a rename; metadata updates in place,
with fsync barriers."""

from __future__ import annotations

import contextlib
import os
import uuid
import warnings
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from .._binary import Source, Writer, fsync_file, locked, output_stream, round_up, truncate_at, write_at
from ..errors import ConversionWarning, UnsupportedError
from ._codec import encode_metadata
from ._errors import ERRORS
from ._matrices import (
    DENSE,
    Layout,
    PackedMatrix,
    data_type_of,
    dense_bit_stride,
    dense_params,
)
from ._reader import (
    Container,
    check_preamble,
    read_block,
    read_slots,
    require_active,
    slot_crc,
)
from ._records import (
    BLOCK_HEADER,
    BLOCK_MAGIC,
    BLOCK_VERSION,
    ENCODING_VERSION,
    ENDIAN_LITTLE,
    FORMAT_VERSION,
    HEADER_BYTES,
    IDENTITY_KEYS,
    MAGIC,
    METADATA_ALIGN,
    PREAMBLE,
    SLOT,
    SLOT_OFFSETS,
    U64_LIMIT,
    WRITER_KEYS,
)


def _dense_chunks(array: np.ndarray, data_type: str, vector: bool, chunk_bytes: int = 1 << 24) -> Iterator[Any]:
    """The payload of a dense numpy array, in row chunks of bounded size (no full copy)."""
    if array.size == 0:
        return
    if data_type == "BIT":
        if vector:
            packed = np.packbits(array, bitorder="little")
            yield packed
            yield bytes(round_up(packed.size, 8) - packed.size)
            return
        stride = dense_bit_stride(array.shape[1])
        step = max(1, chunk_bytes // max(1, array.shape[1]))
        for start in range(0, array.shape[0], step):
            bits = np.packbits(array[start:start + step], axis=1, bitorder="little")
            rows = np.zeros((bits.shape[0], stride), dtype=np.uint8)
            rows[:, :bits.shape[1]] = bits
            yield rows
        return
    if array.flags.c_contiguous:
        yield array
        return
    step = max(1, chunk_bytes // max(1, array.itemsize * (array.shape[1] if array.ndim == 2 else 1)))
    for start in range(0, array.shape[0], step):
        yield np.ascontiguousarray(array[start:start + step])


def _prepare(matrix: Any) -> tuple[Layout, Iterator[Any]]:
    if isinstance(matrix, PackedMatrix):
        return matrix.layout(), iter((matrix.payload,))
    if isinstance(matrix, Container):
        matrix = matrix.values()
    array = np.asarray(matrix)
    if array.ndim not in (1, 2):
        raise UnsupportedError(f"pycauset: save takes a 1-D vector or a 2-D matrix, got {array.ndim} dimensions")
    data_type = data_type_of(array.dtype)
    vector = array.ndim == 1
    transposed = False
    if not vector and not array.flags.c_contiguous and array.flags.f_contiguous and data_type != "BIT":
        # A Fortran-ordered matrix is the transpose of a C-ordered one: store that, zero copy.
        array, transposed = array.T, True
    rows = array.shape[0]
    cols = 1 if vector else array.shape[1]
    matrix_type = "VECTOR" if vector else ("INTEGER" if array.dtype.kind in "iu" else "DENSE_FLOAT")
    layout = Layout(matrix_type, data_type, DENSE, rows, cols, dense_params(data_type, cols, vector),
                    is_transposed=transposed)
    return layout, _dense_chunks(array, data_type, vector)


def identity_metadata(layout: Layout) -> dict[str, Any]:
    """The identity keys arrayio writes for a payload (the same keys pycauset 0.6.1 writes)."""
    return {
        "rows": layout.rows,
        "cols": layout.cols,
        "seed": 0,
        "payload_uuid": uuid.uuid4().hex,
        "view": {"is_transposed": layout.is_transposed, "is_conjugated": False,
                 "scalar": {"real": 1.0, "imag": 0.0}},
        "payload_layout": {"kind": layout.kind, "params": dict(layout.params)},
        "matrix_type": layout.matrix_type,
        "data_type": layout.data_type,
    }


def pack_block(metadata: Mapping[str, Any]) -> bytes:
    """One complete PCMB block (header + encoded payload) for ``metadata``."""
    encoded = encode_metadata(metadata)
    header = BLOCK_HEADER.pack(block_magic=BLOCK_MAGIC, block_version=BLOCK_VERSION,
                               encoding_version=ENCODING_VERSION, payload_length=len(encoded),
                               payload_crc32=zlib.crc32(encoded) & 0xFFFFFFFF)
    return header + encoded


def pack_slot(generation: int, payload_offset: int, payload_length: int, metadata_offset: int,
              metadata_length: int) -> bytes:
    """One 128-byte header slot with its CRC."""
    fields = {"generation": generation, "payload_offset": payload_offset, "payload_length": payload_length,
              "metadata_offset": metadata_offset, "metadata_length": metadata_length}
    return SLOT.pack(**fields, slot_crc32=slot_crc(SLOT.pack(**fields)))


def write_container(target: Any, chunks: Iterator[Any], payload_length: int, metadata: Mapping[str, Any]) -> None:
    """Write a complete container: header (slot A gen 1, slot B gen 0), payload, padding, one block.

    ``target`` is a path (written atomically), a file descriptor or a binary stream.
    """
    block = pack_block(metadata)
    metadata_offset = round_up(HEADER_BYTES + payload_length, METADATA_ALIGN)
    pointers = (HEADER_BYTES, payload_length, metadata_offset, len(block))
    header = (PREAMBLE.pack(magic=MAGIC, format_version=FORMAT_VERSION, endian=ENDIAN_LITTLE,
                            header_bytes=HEADER_BYTES) + pack_slot(1, *pointers) + pack_slot(0, *pointers))
    with output_stream(target) as stream:
        writer = Writer(stream)
        writer.write(header)
        writer.pad_to(HEADER_BYTES)
        for chunk in chunks:
            if isinstance(chunk, np.ndarray):
                writer.write_array(chunk)
            else:
                writer.write(chunk)
        if writer.position != HEADER_BYTES + payload_length:
            raise RuntimeError(f"pycauset writer: wrote {writer.position - HEADER_BYTES} payload bytes, "
                               f"declared {payload_length}")
        writer.pad_to(METADATA_ALIGN)
        writer.write(block)


def save(matrix: Any, path: Any, *, properties: Mapping[str, Any] | None = None,
         metadata: Mapping[str, Any] | None = None) -> None:
    """Save a numpy matrix/vector or a packed layout to ``path`` atomically (temp file, fsync, rename)."""
    layout, chunks = _prepare(matrix)
    document = identity_metadata(layout)
    for key, value in (metadata or {}).items():
        if key in WRITER_KEYS:
            raise UnsupportedError(f"pycauset: metadata key {key!r} is written by save itself")
        document[key] = value
    if properties is not None:
        if "properties" in document:
            raise UnsupportedError("pycauset: give properties either as properties= or in metadata=, not both")
        document["properties"] = {key: value for key, value in properties.items() if value is not None}
    write_container(path, chunks, layout.nbytes(), document)




def _merge(current: Mapping[str, Any], changes: Mapping[str, Any], path: str = "") -> dict[str, Any]:
    merged = dict(current)
    for key, value in changes.items():
        if not isinstance(key, str):
            raise UnsupportedError(f"pycauset metadata: map keys must be str, got {key!r}")
        if not path and key in IDENTITY_KEYS:
            if merged.get(key) != value:
                raise UnsupportedError(f"pycauset: update_metadata cannot change the identity key {key!r} "
                                       "(it describes the payload bytes); save a new file instead")
            continue
        if value is None:
            merged.pop(key, None)
        elif isinstance(value, Mapping):
            # A map merges into the map there (or into nothing), so None inside it deletes at any depth.
            base = merged.get(key)
            merged[key] = _merge(base if isinstance(base, Mapping) else {}, value, f"{path}{key}.")
        else:
            merged[key] = value
    return merged


def update_metadata(path: Any, changes: Mapping[str, Any]) -> int:
    """Merge ``changes`` into the metadata (None deletes a key) crash-safely; returns the new generation.

    Appends a new block, fsyncs, writes the inactive slot with generation + 1,
    fsyncs. The payload and the active slot are never written, so a crash at
    any point leaves the old or the new metadata, and the cost is independent
    of the payload size. An advisory lock (flock) serialises concurrent updaters.
    """
    if not isinstance(changes, Mapping):
        raise UnsupportedError(f"pycauset: changes must be a dict, got {type(changes).__name__}")
    name = os.fsdecode(path)
    # Concurrent updaters take turns (flock), so no merge reads a map another one is replacing.
    with locked(path) as fd:
        with Source.open(name, ERRORS) as source:  # its own descriptor: a map dups it, which would hold the lock
            check_preamble(source)
            slots = read_slots(source)
            active = require_active(slots)
            current = read_block(source, active)
            file_size = source.size
        if active.generation >= U64_LIMIT:
            raise UnsupportedError("pycauset: the generation counter is exhausted (2**64 - 1)")
        block = pack_block(_merge(current, changes))
        block_offset = round_up(file_size, METADATA_ALIGN)
        inactive = "B" if active.name == "A" else "A"
        old_slot = os.pread(fd, SLOT.size, SLOT_OFFSETS[inactive])
        slot = pack_slot(active.generation + 1, int(active.fields.payload_offset),
                         int(active.fields.payload_length), block_offset, len(block))
        try:
            # Barrier 1: the block must be durable before any slot points at it.
            write_at(fd, file_size, bytes(block_offset - file_size) + block, path=name)
            # Barrier 2: the commit is durable when we return.
            write_at(fd, SLOT_OFFSETS[inactive], slot, path=name)
        except BaseException:
            _restore(fd, name, SLOT_OFFSETS[inactive], old_slot, file_size)
            raise
        return active.generation + 1


def _restore(fd: int, name: str, slot_offset: int, old_slot: bytes, file_size: int) -> None:
    """After a failed update: the inactive slot's old bytes back, the file cut to its old length.

    Best effort (the disk that failed may fail again); the slot is restored first, so even a
    half-done restore leaves a file that reads as the old one.
    """
    with contextlib.suppress(OSError):
        write_at(fd, slot_offset, old_slot, sync=False, path=name)
    with contextlib.suppress(OSError):
        truncate_at(fd, file_size, name)
    with contextlib.suppress(OSError):
        fsync_file(fd, name)


def save_model(values: Any, path: Any, attributes: dict) -> None:
    """Save one array of the array model (``arrayio convert``): dense, with the source's pycauset properties."""
    metadata = attributes.get("metadata")
    properties = None
    if isinstance(metadata, dict):
        if metadata.get("matrix_type") not in (None, "DENSE_FLOAT", "INTEGER", "VECTOR"):
            warnings.warn(f"pycauset: the {metadata.get('matrix_type')} matrix is saved dense", ConversionWarning,
                          stacklevel=3)
        properties = metadata.get("properties") if isinstance(metadata.get("properties"), dict) else None
    save(values, path, properties=properties)
