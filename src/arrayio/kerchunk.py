"""kerchunk reference sets (version 1) for arrayio files: other tools read the arrays in place.

``references(target)`` walks the tree the file's format describes
(``arrayio._tree``) and writes, for every array whose chunks are referencable,
Zarr v2 metadata plus ``[url, offset, length]`` per chunk; the codec chain
becomes the v2 dtype byte order and compressor (raw values, or Blosc frames
that numcodecs' Blosc decodes as they are). A computed chunk of an otherwise
referencable array (a short last chunk) is encoded and inlined when small
(listed under ``"inlined"``); an array with computed chunks beyond that is
listed under ``"left_out"`` with the reason its format gives.

A reference set holds a few entries per chunk: it is refused past
``max_references`` entries (an error naming the limit, which the caller may
raise) instead of growing without bound for a file of a million arrays.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

import numpy as np

from ._codecs import encode_chunk
from ._tree import Array, Group, tree_of
from .errors import LimitError, UnsupportedError

__all__ = ["INLINE_LIMIT", "MAX_REFERENCES", "references"]

INLINE_LIMIT = 1 << 20
MAX_REFERENCES = 1_000_000
_DOCUMENTS = frozenset({".zgroup", ".zattrs", ".zarray"})


def _url_of(target: Any) -> str:
    if isinstance(target, os.PathLike):
        target = os.fspath(target)
    if not isinstance(target, str):
        raise UnsupportedError("arrayio.kerchunk: references need a path or URL to point at, "
                               f"not {type(target).__name__} data")
    return target if "://" in target else os.path.abspath(target)


def _v2_dtype(array: Array) -> str:
    dtype = array.dtype
    if dtype.itemsize == 1:
        return dtype.str
    endian = next((codec.get("configuration", {}).get("endian") for codec in array.codecs
                   if codec["name"] == "bytes"), "little")
    return dtype.newbyteorder(">" if endian == "big" else "<").str


def _v2_compressor(array: Array) -> dict | None:
    """The Zarr v2 compressor of the array's codec chain; UnsupportedError for a chain v2 cannot say."""
    compressors = [codec for codec in array.codecs if codec["name"] != "bytes"]
    if not compressors:
        return None
    if len(compressors) == 1 and compressors[0]["name"] == "blosc":
        configuration = compressors[0].get("configuration", {})
        return {"id": "blosc", "cname": configuration.get("cname", "lz4"), "clevel": configuration.get("clevel", 5),
                "shuffle": 1, "blocksize": 0}
    raise UnsupportedError(f"codecs {[codec['name'] for codec in compressors]} have no Zarr v2 compressor")


def _zarray(array: Array, compressor: dict | None) -> str:
    # No fill value: every chunk exists, and readers would otherwise mask real zeros as missing.
    return json.dumps({"zarr_format": 2, "shape": list(array.shape), "chunks": list(array.chunks),
                       "dtype": _v2_dtype(array), "compressor": compressor, "fill_value": None,
                       "filters": None, "order": "C", "dimension_separator": "."})


def _inline(data: Any) -> str:
    return "base64:" + base64.b64encode(bytes(data)).decode("ascii")


def _chunk_refs(path: str, array: Array, url: str, inlined: list) -> dict[str, Any] | str:
    """The chunk entries of one array, or the reason it cannot be referenced."""
    if array.reference is None:
        return array.why_computed
    try:
        compressor = _v2_compressor(array)
    except UnsupportedError as error:
        return str(error)
    found: dict[str, Any] = {}
    for coords in np.ndindex(*array.grid):
        key = f"{path}/{'.'.join(map(str, coords)) if coords else '0'}"
        reference = array.reference(coords)
        if reference is not None:
            found[key] = [url, reference.offset, reference.length]
            continue
        if array.chunk_nbytes > INLINE_LIMIT:
            return f"{array.why_computed} (chunk {key}, over {INLINE_LIMIT} bytes to inline)"
        found[key] = _inline(encode_chunk(array, coords))
        inlined.append({"path": key, "reason": array.why_computed})
    found[f"{path}/.zarray"] = _zarray(array, compressor)
    return found


def references(target: Any, storage_options: dict | None = None, *, max_references: int = MAX_REFERENCES) -> dict:
    """A kerchunk version 1 reference set for ``target`` (path or URL), with ``left_out`` and ``inlined`` lists."""
    import arrayio

    url = _url_of(target)
    with arrayio.open(target, storage_options) as reader:
        return _references(tree_of(reader), url, max_references)


def _references(root: Group, url: str, max_references: int) -> dict:
    refs: dict[str, Any] = {}
    left_out: list[dict] = []
    inlined: list[dict] = []
    for path, node in root.walk():
        prefix = f"{path}/" if path else ""
        if isinstance(node, Group):
            refs[f"{prefix}.zgroup"] = json.dumps({"zarr_format": 2})
            refs[f"{prefix}.zattrs"] = json.dumps(node.attributes)
        else:
            if len(refs) + node.nchunks > max_references:
                raise LimitError(f"arrayio.kerchunk: {url} needs more than max_references={max_references} "
                                 f"entries (at {path!r}); pass a larger max_references to build it")
            found = _chunk_refs(path, node, url, inlined)
            if isinstance(found, str):
                left_out.append({"path": path, "reason": found})
                continue
            refs.update(found)
            refs[f"{path}/.zattrs"] = json.dumps({**node.attributes,
                                                  "_ARRAY_DIMENSIONS": list(node.dimension_names)})
    # Consolidated metadata: zarr then lists nested groups from it (its fsspec store lists them wrongly).
    documents = {key: json.loads(value) for key, value in refs.items() if key.rsplit("/", 1)[-1] in _DOCUMENTS}
    refs[".zmetadata"] = json.dumps({"zarr_consolidated_format": 1, "metadata": documents})
    return {"version": 1, "refs": refs, "left_out": left_out, "inlined": inlined}
