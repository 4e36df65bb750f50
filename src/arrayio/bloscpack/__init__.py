"""bloscpack (``.blp``, magic ``blpk``, format version 3): one Blosc-compressed array or byte stream.

The functions carry bloscpack 0.16.0's names and arguments, so code ports by changing the
import; ``open`` adds lazy, chunk-wise random access. The registry protocol (``info``,
``validate``, ``entries``, ``cat``, ``demo``) serves ``arrayio info|validate|ls|cat|demo``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from .._binary import Source, atomic_write
from .._sources import is_remote, resolve
from ..errors import ArrayIOError, FormatError
from ._format import (
    CHECKSUM_NAMES,
    EXTENSION,
    FORMAT_VERSION,
    MAGIC,
    METADATA_CODECS,
    decode_blosc_flags,
    double_pretty_size,
    pretty_size,
    reverse_pretty,
)
from ._threads import get_nthreads, ordered_map, set_nthreads
from .args import DEFAULT_CHUNK_SIZE, BloscArgs, BloscpackArgs, MetadataArgs, calculate_nchunks
from .exceptions import (
    ERRORS,
    ChecksumLengthMismatch,
    ChecksumMismatch,
    ChunkingException,
    ChunkSizeTypeSizeMismatch,
    FileNotFound,
    FormatVersionMismatch,
    MetadataSectionTooSmall,
    NoChangeInMetadata,
    NoMetadataFound,
    NonUniformTypesize,
    NoSuchChecksum,
    NoSuchCodec,
    NoSuchSerializer,
    NotANumpyArray,
    NotEnoughSpace,
    ObjectNumpyArrayRejection,
    OffsetsRequired,
)
from .reader import BloscpackFile, open_file, progressive_release, require_numpy
from .writer import append_file, pack_buffer, pack_ndarray, rewrite_metadata, to_bytes, to_path

FORMAT_NAME = "bloscpack"

__all__ = [
    "FORMAT_NAME", "MAGIC", "EXTENSION", "FORMAT_VERSION", "CHECKSUM_NAMES",
    "BloscArgs", "BloscpackArgs", "MetadataArgs", "BloscpackFile", "DEFAULT_CHUNK_SIZE",
    "pack_ndarray_to_file", "unpack_ndarray_from_file", "pack_ndarray_to_bytes", "unpack_ndarray_from_bytes",
    "pack_bytes_to_file", "unpack_bytes_from_file", "pack_bytes_to_bytes", "unpack_bytes_from_bytes",
    "pack_file_to_file", "unpack_file_from_file", "append", "rewrite_metadata",
    "open", "info", "validate", "entries", "cat", "demo",
    "calculate_nchunks", "decode_blosc_flags", "pretty_size", "double_pretty_size", "reverse_pretty",
    "set_nthreads", "get_nthreads",
    "FileNotFound", "NoSuchChecksum", "NoSuchCodec", "NoSuchSerializer", "ChunkingException",
    "ChunkSizeTypeSizeMismatch", "ChecksumMismatch", "FormatVersionMismatch", "ChecksumLengthMismatch",
    "NoMetadataFound", "NoChangeInMetadata", "MetadataSectionTooSmall", "NonUniformTypesize",
    "NotEnoughSpace", "NotANumpyArray", "ObjectNumpyArrayRejection", "OffsetsRequired",
]

Progress = Callable[[int], None]


# -- ndarrays -------------------------------------------------------------------------------

def pack_ndarray_to_file(ndarray: np.ndarray, filename: Any, chunk_size: int | str = DEFAULT_CHUNK_SIZE,
                         blosc_args: Any = None, bloscpack_args: Any = None, metadata_args: Any = None) -> None:
    """Write ``ndarray`` (any non-object dtype, any order) to a new file, atomically."""
    to_path(filename, lambda stream: pack_ndarray(stream, ndarray, chunk_size, blosc_args,
                                                  bloscpack_args, metadata_args))


def pack_ndarray_to_bytes(ndarray: np.ndarray, chunk_size: int | str = DEFAULT_CHUNK_SIZE, blosc_args: Any = None,
                          bloscpack_args: Any = None, metadata_args: Any = None) -> bytes:
    """The bytes of a bloscpack file holding ``ndarray``."""
    return to_bytes(lambda stream: pack_ndarray(stream, ndarray, chunk_size, blosc_args,
                                                bloscpack_args, metadata_args))


def _unpack_ndarray(target: Any) -> np.ndarray:
    with open_file(target) as reader:
        require_numpy(reader)
        return reader.read()


def unpack_ndarray_from_file(filename: Any, storage_options: dict | None = None) -> np.ndarray:
    """Read the ndarray stored in ``filename`` (a path, URL or fsspec file; every checksum verified)."""
    if storage_options or is_remote(filename):
        return _unpack_ndarray(resolve(filename, storage_options))
    return _unpack_ndarray(os.fspath(filename))


def unpack_ndarray_from_bytes(bytes_: Any) -> np.ndarray:
    """Read the ndarray stored in the bloscpack bytes ``bytes_``."""
    return _unpack_ndarray(memoryview(bytes_))


# -- byte streams -----------------------------------------------------------------------------

def _as_uint8(bytes_: Any) -> np.ndarray:
    view = memoryview(bytes_).cast("B")
    return np.frombuffer(view, dtype=np.uint8) if len(view) else np.empty(0, np.uint8)


def pack_bytes_to_file(bytes_: Any, out_file: Any, chunk_size: int | str = DEFAULT_CHUNK_SIZE, metadata: Any = None,
                       blosc_args: Any = None, bloscpack_args: Any = None, metadata_args: Any = None) -> None:
    """Write a bytes-like object (with optional JSON ``metadata``) to a new file, atomically."""
    data = _as_uint8(bytes_)
    to_path(out_file, lambda stream: pack_buffer(stream, data, chunk_size, metadata, blosc_args,
                                                 bloscpack_args, metadata_args))


def pack_bytes_to_bytes(bytes_: Any, chunk_size: int | str = DEFAULT_CHUNK_SIZE, metadata: Any = None,
                        blosc_args: Any = None, bloscpack_args: Any = None, metadata_args: Any = None) -> bytes:
    """The bytes of a bloscpack file holding the bytes-like ``bytes_``."""
    data = _as_uint8(bytes_)
    return to_bytes(lambda stream: pack_buffer(stream, data, chunk_size, metadata, blosc_args,
                                               bloscpack_args, metadata_args))


def _unpack_bytes(target: Any) -> tuple[bytes, Any]:
    with open_file(target) as reader:
        out = bytearray(int(reader.starts[-1]))
        reader._read_bytes(0, len(out), _as_uint8(out))
        return bytes(out), reader.metadata


def unpack_bytes_from_file(compressed_file: Any) -> tuple[bytes, Any]:
    """(data, metadata) of a bloscpack file; metadata is None when the file has none."""
    return _unpack_bytes(os.fspath(compressed_file))


def unpack_bytes_from_bytes(bytes_: Any) -> tuple[bytes, Any]:
    """(data, metadata) of bloscpack bytes."""
    return _unpack_bytes(memoryview(bytes_))


# -- files ------------------------------------------------------------------------------------

def _map_input(path: Any) -> tuple[Source, np.ndarray]:
    source = Source.open(os.fspath(path), ERRORS)
    return source, source.array(0, source.size, np.uint8, f"input file {os.fspath(path)}")


def pack_file_to_file(in_file: Any, out_file: Any, chunk_size: int | str = DEFAULT_CHUNK_SIZE, metadata: Any = None,
                      blosc_args: Any = None, bloscpack_args: Any = None, metadata_args: Any = None,
                      progress: Progress | None = None) -> None:
    """Compress the file ``in_file`` into a new bloscpack file ``out_file``."""
    source, data = _map_input(in_file)
    with source:
        to_path(out_file, lambda stream: pack_buffer(stream, data, chunk_size, metadata, blosc_args,
                                                     bloscpack_args, metadata_args, source=source,
                                                     progress=progress))


def unpack_file_from_file(in_file: Any, out_file: Any, progress: Progress | None = None) -> Any:
    """Decompress the bloscpack file ``in_file`` into ``out_file``; returns its metadata (or None)."""
    with open_file(os.fspath(in_file)) as reader, atomic_write(out_file) as stream:
        positions = reader.positions
        release = progressive_release(reader.source)
        for index, chunk in enumerate(ordered_map(reader.read_chunk, range(reader.nchunks), threads=reader.concurrent)):
            stream.write(memoryview(chunk))
            release(int(positions[index]))
            if progress is not None:
                progress(len(chunk))
        return reader.metadata


def append(orig_file: Any, new_file: Any, blosc_args: Any = None, progress: Progress | None = None) -> int:
    """Append the contents of ``new_file`` to the bloscpack file ``orig_file`` in place; returns new chunks.

    ``blosc_args`` is a dict (or BloscArgs) of typesize/clevel/shuffle/cname; missing or None
    values mean the file's typesize and the defaults. An ndarray's shape metadata is left as it
    was (as in bloscpack); use ``rewrite_metadata`` to update it.
    """
    source, data = _map_input(new_file)
    with source:
        return append_file(orig_file, data, blosc_args, progress)


# -- lazy access and the registry protocol ------------------------------------------------------------

def open(path: Any, storage_options: dict | None = None) -> BloscpackFile:  # noqa: A001 - the protocol's name
    """Open a bloscpack file lazily (a path, bytes, URL or fsspec file): ``arr[a:b]`` fetches and decodes
    only the chunks holding rows a..b."""
    return open_file(resolve(path, storage_options) if storage_options else path)


def info(path: Any) -> dict:
    """Facts about a bloscpack file (header, metadata, first chunk), without decoding any data."""
    with open_file(path) as reader:
        header = reader.header
        size = reader.source.size
        nbytes = int(reader.starts[-1])
        holds = f"ndarray {'x'.join(map(str, reader.shape))} {reader.dtype}" if reader.is_numpy else "bytes"
        facts: dict[str, Any] = {
            "summary": (f"{holds}, {pretty_size(nbytes)} in {reader.nchunks} chunk{'s' if reader.nchunks != 1 else ''}"
                        f" -> {pretty_size(size)}"),
            "format_version": header.format_version,
            "container": "numpy" if reader.is_numpy else "bytes",
        }
        if reader.is_numpy:
            facts.update(dtype=str(reader.dtype), shape=list(reader.shape), order=reader.order)
        end = int(reader.positions[-1]) + reader.chunk_location(reader.nchunks - 1)[1].cbytes + reader.checksum.size \
            if reader.nchunks else reader.data_offset
        facts.update(
            nbytes=nbytes, file_size=size, ratio=round(nbytes / size, 3) if size else None,
            nchunks=reader.nchunks, chunk_size=header.chunk_size, last_chunk=header.last_chunk,
            typesize=header.typesize, checksum=reader.checksum.name, offsets=reader.offsets is not None,
            max_app_chunks=header.max_app_chunks, first_offsets=[int(x) for x in reader.positions[:5]],
            trailing_bytes=size - end,
        )
        if reader.metadata_section is not None:
            meta = reader.metadata_section.header
            facts["metadata"] = reader.metadata
            facts["metadata_header"] = {
                "meta_checksum": reader.metadata_section.checksum.name,
                "meta_codec": METADATA_CODECS[meta.meta_codec], "meta_level": meta.meta_level,
                "meta_size": meta.meta_size, "max_meta_size": meta.max_meta_size,
                "meta_comp_size": meta.meta_comp_size}
        if reader.nchunks:
            position, first = reader.chunk_location(0)
            facts["first_chunk"] = {**first._asdict(), **decode_blosc_flags(first.flags)}
        return facts


def validate(path: Any) -> list[str]:
    """Every problem found in the file, with every checksum verified and every chunk decoded (empty = valid)."""
    try:
        with open_file(path) as reader:
            return reader.verify()
    except FormatError as error:
        return [str(error)]


def entries(path: Any) -> list[dict]:
    """One row per chunk: name ``chunkN``, byte offset, compressed and uncompressed sizes, codec."""
    with open_file(path) as reader:
        rows = []
        for index in range(reader.nchunks):
            position, header = reader.chunk_location(index)
            flags = decode_blosc_flags(header.flags)
            shuffle = "bit" if flags["bit_shuffle"] else "byte" if flags["byte_shuffle"] else "none"
            rows.append({"name": f"chunk{index}", "offset": position, "cbytes": header.cbytes,
                         "nbytes": header.nbytes, "codec": "memcpy" if flags["pure_memcpy"] else flags["codec"],
                         "shuffle": shuffle})
        return rows


def _lines(values: np.ndarray) -> Iterator[str]:
    for value in values.tolist():
        yield value if isinstance(value, str) else str(value)


def cat(path: Any, name: str) -> Iterator[str]:
    """Lines for ``arrayio cat``: ``data`` prints every value (storage order), ``chunkN`` one chunk's
    values, ``metadata`` the JSON metadata."""
    with open_file(path) as reader:
        if name == "metadata":
            yield json.dumps(reader.metadata, indent=2, ensure_ascii=False)
            return
        if name.startswith("chunk") and name[5:].isdigit():
            index = int(name[5:])
            if not 0 <= index < reader.nchunks:
                raise KeyError(name)
            chunk = reader.read_chunk(index)
            if len(chunk) % reader.dtype.itemsize:
                raise ERRORS.invalid(f"chunk {index}", reader.chunk_location(index)[0],
                                     f"a whole number of {reader.dtype.itemsize}-byte items", f"{len(chunk)} bytes")
            yield from _lines(chunk.view(reader.dtype))
            return
        if name != "data":
            raise KeyError(name)
        if reader.order != "C" or not reader.shape:
            yield from _lines(reader.read().reshape(-1, order="K"))
            return
        per_row = max(1, math.prod(reader.shape[1:]))
        step = max(1, (1 << 20) // per_row)
        for low in range(0, reader.shape[0], step):
            yield from _lines(reader[low:low + step].reshape(-1))


def demo(folder: Path) -> Path:
    """Write a small 2-D float64 array to ``folder/demo.blp``, read it back, check it, return the path."""
    path = Path(folder) / "demo.blp"
    array = np.linspace(0, 1, 4096 * 8).reshape(4096, 8)
    pack_ndarray_to_file(array, path, chunk_size="64K")
    with open_file(path) as reader:
        if not (np.array_equal(reader.read(), array) and np.array_equal(reader[100:110], array[100:110])):
            raise ArrayIOError("bloscpack demo: the array read back differs from the one written")
    return path

