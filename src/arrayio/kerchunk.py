"""kerchunk reference sets (version 1) for arrayio files: other tools read the arrays in place.

``references(target)`` describes every array of :func:`arrayio.zarr.open_store`'s
hierarchy whose chunks are plain little-endian byte ranges of the file
(kastore, kast, dense pycauset payloads) or whole Blosc chunks that numcodecs'
Blosc codec decodes as they are (bloscpack files whose chunk size is a whole
number of rows), as Zarr v2 metadata plus ``[url, offset, length]`` per chunk.
What cannot be described that way is listed under ``"left_out"`` with the
reason; an edge chunk that zarr cannot take as stored is inlined (listed
under ``"inlined"``).
"""

from __future__ import annotations

import base64
import json
import math
import os
from typing import Any

import blosc
import numpy as np

from . import limits
from .errors import UnsupportedError
from .zarr import FormatStore, VirtualArray, VirtualGroup, open_store

__all__ = ["INLINE_LIMIT", "references"]

INLINE_LIMIT = 1 << 20
_DOCUMENTS = frozenset({".zgroup", ".zattrs", ".zarray"})


def _url_of(target: Any) -> str:
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise UnsupportedError("arrayio.kerchunk: references need a path or URL to point at, "
                               f"not {type(target).__name__} data")
    return target if "://" in target else os.path.abspath(target)


def _v2_dtype(dtype: np.dtype) -> str:
    return dtype.newbyteorder("<").str if dtype.itemsize > 1 else dtype.str


def _zarray(array: VirtualArray, compressor: dict | None) -> str:
    # No fill value: every chunk exists, and readers would otherwise mask real zeros as missing.
    return json.dumps({"zarr_format": 2, "shape": list(array.shape), "chunks": list(array.chunks),
                       "dtype": _v2_dtype(array.dtype), "compressor": compressor, "fill_value": None,
                       "filters": None, "order": "C", "dimension_separator": "."})


def _chunk_keys(path: str, array: VirtualArray) -> list[tuple[str, tuple[int, ...]]]:
    return [(f"{path}/{'.'.join(map(str, coords)) if coords else '0'}", coords) for coords in np.ndindex(*array.grid)]


def _inline(data: bytes) -> str:
    return "base64:" + base64.b64encode(data).decode("ascii")


def _plain(path: str, array: VirtualArray, url: str, file_size: int, refs: dict, inlined: list) -> str | None:
    full = int(np.prod(array.chunks)) * array.dtype.itemsize
    byte_range = array.byte_range
    assert byte_range is not None
    for key, coords in _chunk_keys(path, array):
        offset, length = byte_range(coords)
        if length == full or offset + full <= file_size:
            # A short edge chunk followed by other bytes of the file is referenced at full size:
            # zarr reads the chunk whole and keeps only the part inside the array.
            refs[key] = [url, offset, full]
        elif full <= INLINE_LIMIT:
            refs[key] = _inline(bytes(array.encoded_chunk(coords)))
            inlined.append({"path": key, "reason": "a short edge chunk at the end of the file, stored at full size"})
        else:
            return (f"its last chunk ends the file {full - length} bytes short of a full chunk and is over "
                    f"{INLINE_LIMIT} bytes to inline")
    return None


def _blosc(path: str, array: VirtualArray, url: str, refs: dict, inlined: list) -> str | None:
    located: dict[str, Any] = {}
    blosc_chunk = array.blosc_chunk
    assert blosc_chunk is not None
    for key, coords in _chunk_keys(path, array):
        region = array.region(coords)
        if any(part.stop - part.start != size for part, size in zip(region, array.chunks)):
            # The short last Blosc chunk decodes to less than a chunk: stored again at full size.
            padded = bytes(array.encoded_chunk(coords))
            located[key] = _inline(blosc.compress(padded, typesize=array.dtype.itemsize, cname="zstd"))
            inlined.append({"path": key, "reason": "the short last Blosc chunk, re-encoded at full chunk size"})
            continue
        location = blosc_chunk(coords)
        if location is None:
            return ("its Blosc chunks are not whole zarr chunks (a chunk size that is not a multiple of the "
                    "row size, or Fortran order): zarr would need bytes of two Blosc chunks per chunk")
        offset, length = location
        located[key] = [url, offset, length]
    refs.update(located)
    return None


def references(target: Any, storage_options: dict | None = None) -> dict:
    """A kerchunk version 1 reference set for ``target`` (path or URL), with ``left_out`` and ``inlined`` lists."""
    url = _url_of(target)
    store = open_store(target, storage_options)
    try:
        return _references(store, url)
    finally:
        store.close()


def _references(store: FormatStore, url: str) -> dict:
    refs: dict[str, Any] = {}
    left_out: list[dict] = []
    inlined: list[dict] = []
    file_size = int(getattr(getattr(store.reader, "source", None), "size", 0))
    for path, node in store.root.walk():
        prefix = f"{path}/" if path else ""
        if isinstance(node, VirtualGroup):
            refs[f"{prefix}.zgroup"] = json.dumps({"zarr_format": 2})
            refs[f"{prefix}.zattrs"] = json.dumps(node.attributes)
            continue
        limits.check("references", len(refs) + math.prod(node.grid), f"the references up to array {path!r}")
        if node.byte_range is not None:
            compressor = None
            reason = _plain(path, node, url, file_size, refs, inlined)
        elif node.blosc_chunk is not None:
            compressor = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
            reason = _blosc(path, node, url, refs, inlined)
        else:
            reason = _why_not(path, node)
        if reason is not None:
            for key in [key for key in refs if key.startswith(f"{path}/")]:
                del refs[key]
            inlined[:] = [item for item in inlined if not item["path"].startswith(f"{path}/")]
            left_out.append({"path": path, "reason": reason})
            continue
        refs[f"{path}/.zarray"] = _zarray(node, compressor)
        refs[f"{path}/.zattrs"] = json.dumps({**node.attributes, "_ARRAY_DIMENSIONS": list(node.dimension_names)})
    # Consolidated metadata: zarr then lists nested groups from it (its fsspec store lists them wrongly).
    documents = {key: json.loads(value) for key, value in refs.items() if key.rsplit("/", 1)[-1] in _DOCUMENTS}
    refs[".zmetadata"] = json.dumps({"zarr_consolidated_format": 1, "metadata": documents})
    return {"version": 1, "refs": refs, "left_out": left_out, "inlined": inlined}


def _why_not(path: str, array: VirtualArray) -> str:
    if array.strings:
        return "a column of strings taken from the episode metadata, not bytes of the file"
    if "camera" in array.attributes:
        return "camera frames are JPEG/PNG (or raw) records spread through the file, one per frame"
    if path.startswith("episodes/"):
        return "kdb steps interleave state, action, reward and terminal per frame: no plain range per field"
    if path == "matrix":
        return ("a packed pycauset layout (bits, triangle, diagonal), or a transposed, conjugated or scaled "
                "view: the values are not the stored bytes")
    return "its values come from the file's index and metadata, not from one byte range"
