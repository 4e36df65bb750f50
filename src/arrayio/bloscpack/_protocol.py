"""The registry protocol of bloscpack: open, info, validate, entries, cat, demo."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .._text import value_lines
from ..errors import ArrayIOError, FormatError
from ._errors import (
    ERRORS,
)
from ._reader import BloscpackFile, open_file
from ._records import (
    METADATA_CODECS,
    decode_blosc_flags,
    pretty_size,
)
from ._writer import pack_ndarray_to_file


def open(path: Any) -> BloscpackFile:  # noqa: A001 - the registry protocol's name
    """Open a bloscpack file lazily: ``arr[a:b]`` decodes only the chunks holding rows a..b."""
    return open_file(path)


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
            yield from value_lines(chunk.view(reader.dtype))
            return
        if name != "data":
            raise KeyError(name)
        if reader.order != "C" or not reader.shape:
            yield from value_lines(reader.read())
            return
        per_row = max(1, math.prod(reader.shape[1:]))
        step = max(1, (1 << 20) // per_row)
        for low in range(0, reader.shape[0], step):
            yield from value_lines(reader[low:low + step])


def demo(folder: Path) -> Path:
    """Write a small 2-D float64 array to ``folder/demo.blp``, read it back, check it, return the path."""
    path = Path(folder) / "demo.blp"
    array = np.linspace(0, 1, 4096 * 8).reshape(4096, 8)
    pack_ndarray_to_file(array, path, chunk_size="64K")
    with open_file(path) as reader:
        if not (np.array_equal(reader.read(), array) and np.array_equal(reader[100:110], array[100:110])):
            raise ArrayIOError("bloscpack demo: the array read back differs from the one written")
    return path
