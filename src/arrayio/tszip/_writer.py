"""Writing tszip files: a zip (members stored) of a Zarr v2 hierarchy of 1-D columns, chunk by chunk.

What tszip writes and ``tszip.decompress`` reads: ``.zgroup``/``.zattrs`` for
the root and each group, ``.zarray`` per column (dtype, chunks, fill value 0,
optional delta filter, Blosc zstd level 9 with byte shuffle), then each chunk
as a full-length Blosc buffer (the last one padded with the fill value, as
Zarr v2 chunks always are). Only one chunk is in memory at a time.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._binary import atomic_write
from ._reader import chunk_count

# tszip's chunk length: 8 Mi elements (32 MiB of 4-byte integers before compression).
DEFAULT_CHUNK = 8 << 20
COMPRESSOR = {"id": "blosc", "cname": "zstd", "clevel": 9, "shuffle": 1, "blocksize": 0}


@dataclass
class Array:
    """One column to write: its path (``nodes/time``), values, and whether a delta filter goes first."""

    path: str
    values: np.ndarray
    delta: bool = False
    attributes: dict = field(default_factory=dict)


def _json(value: Any) -> bytes:
    return json.dumps(value, indent=2, sort_keys=False).encode("utf-8")


def _zarray(array: Array, chunk: int) -> dict[str, Any]:
    dtype = array.values.dtype
    return {"shape": [int(array.values.shape[0])], "chunks": [chunk], "dtype": dtype.str, "fill_value": 0,
            "order": "C",
            "filters": [{"id": "delta", "dtype": dtype.str, "astype": dtype.str}] if array.delta else None,
            "dimension_separator": ".", "compressor": COMPRESSOR, "zarr_format": 2}


def _chunks(array: Array, chunk: int) -> Iterable[tuple[int, bytes]]:
    """(index, Blosc-compressed chunk) of each chunk holding more than the fill value (zarr leaves those
    out); delta-filtered chunks restart from their own first value, as zarr's do."""
    import blosc

    values = array.values
    dtype = values.dtype
    for index in range(chunk_count(values.shape[0], chunk)):
        part = np.zeros(chunk, dtype=dtype)
        piece = values[index * chunk:(index + 1) * chunk]
        part[:piece.shape[0]] = piece
        if not part.any():
            continue
        if array.delta:
            part[1:] = np.diff(part)
        yield index, blosc.compress(part.tobytes(), typesize=dtype.itemsize, clevel=COMPRESSOR["clevel"],
                                    shuffle=blosc.SHUFFLE, cname=COMPRESSOR["cname"])


def dump(arrays: Iterable[Array], attributes: dict[str, Any], target: Any, *, chunk: int = DEFAULT_CHUNK) -> None:
    """Write ``arrays`` (1-D, numeric) and the root ``attributes`` as a new tszip file at ``target``, in chunks
    of at most ``chunk`` elements."""
    if chunk < 1:
        raise ValueError(f"tszip: chunk must be at least 1 element, not {chunk}")
    with atomic_write(target) as stream, \
            zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        archive.writestr(".zgroup", _json({"zarr_format": 2}))
        archive.writestr(".zattrs", _json(attributes))
        groups_written = {""}
        for array in arrays:
            if array.values.ndim != 1 or array.values.dtype.kind not in "iufb":
                raise ValueError(f"tszip: column {array.path!r} must be a 1-D numeric array, "
                                 f"not {array.values.dtype} of shape {array.values.shape}")
            group = array.path.rpartition("/")[0]
            if group not in groups_written:
                archive.writestr(f"{group}/.zgroup", _json({"zarr_format": 2}))
                archive.writestr(f"{group}/.zattrs", _json({}))
                groups_written.add(group)
            # A column shorter than a chunk gets a chunk of its own length: Zarr v2 pads every chunk to full
            # length, and compressing megabytes of padding per short column is most of tszip's time.
            length = min(chunk, max(1, array.values.shape[0]))
            archive.writestr(f"{array.path}/.zarray", _json(_zarray(array, length)))
            archive.writestr(f"{array.path}/.zattrs", _json(array.attributes))
            for index, data in _chunks(array, length):
                archive.writestr(f"{array.path}/{index}", data)
