"""Writing bloscpack files: the metadata section, the chunk stream, in-place append and metadata rewrite.

Chunks are Blosc1 buffers from python-blosc, compressed one chunk per worker thread straight
from the caller's memory; each is followed by its digest. The offsets table is written as -1
placeholders and patched once the chunk positions are known. New files go through
``atomic_write``; so do ``append`` and ``rewrite_metadata``, which build the changed file beside
the old one under a flock (docs/formats/bloscpack.md says why not in place).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import zlib
from typing import Any, BinaryIO, Callable

import blosc
import numpy as np

from .._binary import Source, Writer, atomic_write, copy_range, locked
from ..errors import UnsupportedError
from ._args import (
    DEFAULT_CHUNK_SIZE,
    BloscArgs,
    BloscpackArgs,
    MetadataArgs,
    calculate_nchunks,
    resolve_max_app_chunks,
)
from ._errors import (
    ERRORS,
    ChecksumLengthMismatch,
    ChunkSizeTypeSizeMismatch,
    MetadataSectionTooSmall,
    NoChangeInMetadata,
    NoMetadataFound,
    NonUniformTypesize,
    NotEnoughSpace,
    ObjectNumpyArrayRejection,
    OffsetsRequired,
)
from ._reader import (
    BloscpackFile,
    Progress,
    _as_uint8,
    _map_input,
    deprecated_alias,
    progressive_release,
)
from ._records import (
    FORMAT_VERSION,
    HEADER,
    MAGIC,
    MAX_META_SIZE,
    MAX_TYPESIZE,
    METADATA_CODECS,
    METADATA_HEADER,
    OFFSET_SIZE,
    OPTION_METADATA,
    OPTION_OFFSETS,
    UNKNOWN,
    Checksum,
    checksum_named,
)
from ._threads import ordered_map

_MINUS_ONES = b"\xff" * (OFFSET_SIZE * 8192)


def metadata_section(metadata: Any, metadata_args: MetadataArgs,
                     max_meta_size: int | None = None) -> tuple[bytes, bytes, int, bytes]:
    """The metadata section as (header, stored bytes, number of zero padding bytes, digest).

    JSON is compact and ASCII; zlib is used only when it makes the bytes shorter (the codec
    byte then says 'None'). ``max_meta_size`` overrides the rule in ``metadata_args`` (rewrite).
    """
    metadata_args.checked()
    text = json.dumps(metadata, separators=(",", ":")).encode("ascii")
    stored, codec = text, "None"
    if metadata_args.meta_codec == "zlib":
        compressed = zlib.compress(text, metadata_args.meta_level)
        if len(compressed) <= len(text):
            stored, codec = compressed, "zlib"
    if max_meta_size is None:
        max_meta_size = metadata_args.effective_max_meta_size(len(text))
    if len(text) > MAX_META_SIZE or max_meta_size > MAX_META_SIZE:
        raise MetadataSectionTooSmall(f"bloscpack: metadata sizes are uint32; {max(len(text), max_meta_size)} "
                                      f"bytes do not fit")
    if len(stored) > max_meta_size:
        raise MetadataSectionTooSmall(f"bloscpack: the metadata needs {len(stored)} bytes, "
                                      f"the section has room for {max_meta_size}")
    checksum = checksum_named(metadata_args.meta_checksum)
    header = METADATA_HEADER.pack(
        magic_format=metadata_args.magic_format, meta_checksum=checksum.id,
        meta_codec=METADATA_CODECS.index(codec), meta_level=metadata_args.meta_level,
        meta_size=len(text), max_meta_size=max_meta_size, meta_comp_size=len(stored))
    return header, stored, max_meta_size - len(stored), checksum(stored)


def _compressor(data: np.ndarray, chunk_size: int, blosc_args: BloscArgs,
                checksum: Checksum) -> Callable[[int], tuple[bytes, bytes]]:
    view = data.data
    shuffle = int(blosc_args.shuffle)

    def compress(index: int) -> tuple[bytes, bytes]:
        piece = view[index * chunk_size:(index + 1) * chunk_size]
        compressed = blosc.compress(piece, blosc_args.typesize, blosc_args.clevel, shuffle, blosc_args.cname)
        return compressed, checksum(compressed)

    return compress


def _writeback(stream: BinaryIO) -> Callable[[int], None]:
    """Start the kernel writing out each finished 32 MiB of a real file while we compress on, so
    the fsync that makes the file durable waits for the tail only (a no-op for other streams)."""
    try:
        fd = stream.fileno()
        origin = stream.tell()
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return lambda position: None
    flushed = [0]
    step = 32 * 2**20

    def advance(position: int) -> None:
        if position - flushed[0] >= step:
            stream.flush()
            with contextlib.suppress(OSError):
                # on dirty pages DONTNEED only starts their writeback; they stay cached
                os.posix_fadvise(fd, origin + flushed[0], position - flushed[0], os.POSIX_FADV_DONTNEED)
            flushed[0] = position

    return advance if hasattr(os, "posix_fadvise") else (lambda position: None)


def _write_chunks(writer: Writer, data: np.ndarray, first: int, count: int, chunk_size: int,
                  blosc_args: BloscArgs, checksum: Checksum, source: Source | None = None,
                  progress: Progress | None = None) -> list[int]:
    """Compress chunks ``first..first+count-1`` of ``data`` in parallel, write them in order."""
    compress = _compressor(data, chunk_size, blosc_args, checksum)
    writeback = _writeback(writer.stream)
    release = progressive_release(source) if source is not None else None
    positions = []
    for index, (compressed, digest) in zip(range(first, first + count),
                                           ordered_map(compress, range(first, first + count))):
        positions.append(writer.position)
        writer.write(compressed)
        writer.write(digest)
        writeback(writer.position)
        if release is not None:
            release(index * chunk_size)
        if progress is not None:
            progress(min(len(data), (index + 1) * chunk_size) - min(len(data), index * chunk_size))
    return positions


def pack_buffer(stream: BinaryIO, data: np.ndarray, chunk_size: int | str, metadata: Any = None,
                blosc_args: Any = None, bloscpack_args: Any = None, metadata_args: Any = None,
                source: Source | None = None, progress: Progress | None = None) -> None:
    """Write the 1-D ``uint8`` array ``data`` as a complete bloscpack file to a seekable ``stream``."""
    blosc_args = BloscArgs.coerce(blosc_args).checked()
    bloscpack_args = BloscpackArgs.coerce(bloscpack_args).checked()
    nchunks, chunk_size, last_chunk = calculate_nchunks(len(data), chunk_size)
    max_app_chunks = resolve_max_app_chunks(bloscpack_args.offsets, nchunks, bloscpack_args.max_app_chunks)
    checksum = checksum_named(bloscpack_args.checksum)
    section = None
    if metadata is not None:
        section = metadata_section(metadata, MetadataArgs.coerce(metadata_args))
    options = (OPTION_OFFSETS if bloscpack_args.offsets else 0) | (OPTION_METADATA if section else 0)
    writer = Writer(stream)
    writer.write(HEADER.pack(magic=MAGIC, format_version=FORMAT_VERSION, options=options, checksum=checksum.id,
                             typesize=blosc_args.typesize, chunk_size=chunk_size, last_chunk=last_chunk,
                             nchunks=nchunks, max_app_chunks=max_app_chunks))
    if section is not None:
        meta_header, stored, padding, digest = section
        writer.write(meta_header)
        writer.write(stored)
        writer.zeros(padding)
        writer.write(digest)
    table = writer.position
    if bloscpack_args.offsets:
        remaining = (nchunks + max_app_chunks) * OFFSET_SIZE
        while remaining:
            step = min(remaining, len(_MINUS_ONES))
            writer.write(_MINUS_ONES[:step])
            remaining -= step
    positions = _write_chunks(writer, data, 0, nchunks, chunk_size, blosc_args, checksum, source, progress)
    if bloscpack_args.offsets:
        writer.patch(table, np.asarray(positions, dtype="<i8").tobytes())


def ndarray_payload(ndarray: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
    """The array's bytes (C or Fortran order, copied only when not contiguous) and its metadata."""
    ndarray = np.asanyarray(ndarray)
    if ndarray.dtype.hasobject:
        raise ObjectNumpyArrayRejection(f"bloscpack: dtype {ndarray.dtype} holds Python objects, "
                                        "which cannot be stored")
    if ndarray.dtype.itemsize > MAX_TYPESIZE or ndarray.dtype.itemsize == 0:
        raise UnsupportedError(f"bloscpack: the itemsize of dtype {ndarray.dtype} is {ndarray.dtype.itemsize}; "
                               f"the format stores 1..{MAX_TYPESIZE} (the header's typesize byte)")
    fortran = bool(np.isfortran(ndarray))
    if not fortran and not ndarray.flags.c_contiguous:
        ndarray = np.ascontiguousarray(ndarray)
    metadata = {
        "dtype": repr(ndarray.dtype.descr) if ndarray.dtype.names is not None else repr(ndarray.dtype.str),
        "shape": list(ndarray.shape),
        "order": "F" if fortran else "C",
        "container": "numpy",
    }
    flat = ndarray.reshape(-1, order="F" if fortran else "C")
    return flat.view(np.uint8) if flat.size else np.empty(0, np.uint8), metadata


def pack_ndarray(stream: BinaryIO, ndarray: np.ndarray, chunk_size: int | str, blosc_args: Any,
                 bloscpack_args: Any, metadata_args: Any, progress: Progress | None = None) -> None:
    """Write ``ndarray`` with its numpy metadata; chunks must hold whole items."""
    data, metadata = ndarray_payload(ndarray)
    itemsize = np.asarray(ndarray).dtype.itemsize
    _, effective, _ = calculate_nchunks(len(data), chunk_size)
    if effective % itemsize:
        raise ChunkSizeTypeSizeMismatch(f"bloscpack: chunk_size {effective} is not a multiple of the "
                                        f"itemsize {itemsize}")
    blosc_args = BloscArgs.coerce(blosc_args).with_typesize(itemsize)
    pack_buffer(stream, data, chunk_size, metadata, blosc_args, bloscpack_args, metadata_args, progress=progress)


def to_bytes(write: Callable[[BinaryIO], None]) -> bytes:
    """Run a writer against an in-memory stream and return the bytes."""
    buffer = io.BytesIO()
    write(buffer)
    return buffer.getvalue()


def to_path(path: Any, write: Callable[[BinaryIO], None]) -> None:
    """Run a writer against a new file at ``path``, atomically (temp file, fsync, rename)."""
    with atomic_write(path) as stream:
        write(stream)


def append_file(orig_file: Any, new_data: np.ndarray, blosc_args: Any = None,
                progress: Progress | None = None) -> int:
    """Append the bytes of ``new_data`` to the bloscpack file ``orig_file``; returns the new chunk count.

    The last chunk is topped up to chunk_size, the rest goes into new chunks that must fit the
    spare offset slots. The contiguous layout makes the old last chunk's bytes part of both the
    old and the new file, so no in-place order survives a crash: the new file is built beside
    the old one (the unchanged prefix copied in the kernel, a reflink where the file system
    shares blocks), fsynced and renamed over it, under an exclusive flock (docs/formats/bloscpack.md).
    """
    name = os.fsdecode(orig_file)
    with locked(orig_file) as fd:
        with Source.open(name, ERRORS) as source:  # its own descriptor: a map dups it, which would hold the lock
            reader = BloscpackFile(source)
            header = reader.header
            if reader.chunk_offsets is None:
                raise OffsetsRequired("bloscpack: appending needs an offsets table; this file has none "
                                      "(it was written with offsets disabled)")
            if header.chunk_size == UNKNOWN or header.last_chunk == UNKNOWN or header.nchunks == UNKNOWN:
                raise UnsupportedError("bloscpack: appending needs a file with known chunk_size, last_chunk "
                                       "and nchunks")
            if header.chunk_size == 0 and len(new_data):
                raise UnsupportedError("bloscpack: cannot append to a file written from empty input "
                                       "(its chunk_size is 0); pack the data anew")
            args: dict[str, Any] = {"typesize": None, "clevel": None, "shuffle": None, "cname": None}
            args.update(dict(blosc_args or {}))
            if args["typesize"] is None:
                if header.typesize == 0:
                    raise NonUniformTypesize("bloscpack: the file records no typesize; pass blosc_args typesize")
                args["typesize"] = header.typesize
            blosc_args = BloscArgs.coerce({key: value for key, value in args.items() if value is not None}).checked()
            last = reader.nchunks - 1
            last_position = int(reader.positions[last])
            tail = reader.read_chunk(last)
            checksum = reader.checksum
            table = reader.offsets_offset
            reader.close()
        room = header.chunk_size - len(tail)
        top_up = new_data[:room]
        rest = new_data[len(top_up):]
        count, _, last_chunk = calculate_nchunks(len(rest), header.chunk_size) if len(rest) else (0, 0, 0)
        if count > header.max_app_chunks:
            raise NotEnoughSpace(f"bloscpack: appending needs {count} new chunks, the offsets table has room "
                                 f"for {header.max_app_chunks} (max_app_chunks)")
        merged = np.concatenate([tail, top_up])
        compressed, digest = _compressor(merged, len(merged) or 1, blosc_args, checksum)(0)
        new_header = HEADER.pack(**{**header._asdict(), "nchunks": header.nchunks + count,
                                    "last_chunk": last_chunk if count else len(merged),
                                    "max_app_chunks": header.max_app_chunks - count})
        with atomic_write(orig_file) as stream:
            copy_range(fd, stream, 0, last_position, name)
            writer = Writer(stream, position=last_position)
            writer.write(compressed)
            writer.write(digest)
            positions = _write_chunks(writer, rest, 0, count, header.chunk_size, blosc_args, checksum,
                                      progress=progress)
            if count:
                writer.patch(table + (last + 1) * OFFSET_SIZE, np.asarray(positions, "<i8").tobytes())
            writer.patch(0, new_header)
    return count


def rewrite_metadata(path: Any, metadata: Any, checksum: str | None = None, codec: str = "zlib",
                     level: int = 6) -> None:
    """Replace the JSON metadata of ``path``, inside the room its section already has.

    The new file is built beside the old one (a kernel copy with the section patched), fsynced
    and renamed over it under an exclusive flock, so a crash leaves the old or the new metadata.
    """
    name = os.fsdecode(path)
    with locked(path) as fd:
        with Source.open(name, ERRORS) as source:  # its own descriptor: a map dups it, which would hold the lock
            reader = BloscpackFile(source)
            section = reader.metadata_section
            if section is None:
                raise NoMetadataFound(f"bloscpack: {reader.name} has no metadata section to rewrite")
            old = section.header
            if section.value == metadata:
                raise NoChangeInMetadata("bloscpack: the new metadata equals the stored metadata")
            new_checksum = checksum_named(checksum) if checksum is not None else section.checksum
            if new_checksum.size != section.checksum.size:
                raise ChecksumLengthMismatch(f"bloscpack: the metadata checksum {new_checksum.name} has "
                                             f"{new_checksum.size}-byte digests, the section holds "
                                             f"{section.checksum.size}")
            offset = section.offset
            size = source.size
            reader.close()
        args = MetadataArgs(meta_checksum=new_checksum.name, meta_codec=codec, meta_level=level)
        meta_header, stored, padding, digest = metadata_section(metadata, args, max_meta_size=old.max_meta_size)
        with atomic_write(path) as stream:
            copy_range(fd, stream, 0, size, name)
            Writer(stream, position=size).patch(offset, meta_header + stored + bytes(padding) + digest)


# -- the reference's pack functions -----------------------------------------------------------


def save_model(values: np.ndarray, filename: Any, attributes: dict) -> None:
    """Write one array of the array model (``arrayio convert``); its attributes are not kept."""
    pack_ndarray_to_file(values, filename)


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


def pack_file_to_file(in_file: Any, out_file: Any, chunk_size: int | str = DEFAULT_CHUNK_SIZE, metadata: Any = None,
                      blosc_args: Any = None, bloscpack_args: Any = None, metadata_args: Any = None,
                      progress: Progress | None = None) -> None:
    """Compress the file ``in_file`` into a new bloscpack file ``out_file``."""
    source, data = _map_input(in_file)
    with source:
        to_path(out_file, lambda stream: pack_buffer(stream, data, chunk_size, metadata, blosc_args,
                                                     bloscpack_args, metadata_args, source=source,
                                                     progress=progress))


def append(orig_file: Any, new_file: Any, blosc_args: Any = None, progress: Progress | None = None) -> int:
    """Append the contents of ``new_file`` to the bloscpack file ``orig_file`` in place; returns new chunks.

    ``blosc_args`` is a dict (or BloscArgs) of typesize/clevel/shuffle/cname; missing or None
    values mean the file's typesize and the defaults. An ndarray's shape metadata is left as it
    was (as in bloscpack); use ``rewrite_metadata`` to update it.
    """
    source, data = _map_input(new_file)
    with source:
        return append_file(orig_file, data, blosc_args, progress)


pack_ndarray_file = deprecated_alias(pack_ndarray_to_file, "pack_ndarray_file")
pack_ndarray_str = deprecated_alias(pack_ndarray_to_bytes, "pack_ndarray_str")
pack_bytes_file = deprecated_alias(pack_bytes_to_file, "pack_bytes_file")
pack_file = deprecated_alias(pack_file_to_file, "pack_file")

