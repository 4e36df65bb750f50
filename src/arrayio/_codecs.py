"""Encoding a chunk of the array model through its Zarr v3 codec chain (for the views that serve bytes).

A referencable chunk is served as the file's bytes; a computed one is read
and encoded here with the codecs the model names: ``bytes`` (in its byte
order), ``blosc`` (a Blosc1 frame, python-blosc) and ``vlen-utf8`` strings.
numpy and blosc only: the views that need it (zarr store, kerchunk
references) and ``convert`` share it without importing zarr.
"""

from __future__ import annotations

from typing import Any

import blosc
import numpy as np

from ._tree import Array
from .errors import UnsupportedError

__all__ = ["encode_chunk", "vlen_utf8"]

_SHUFFLES = {"noshuffle": blosc.NOSHUFFLE, "shuffle": blosc.SHUFFLE, "bitshuffle": blosc.BITSHUFFLE}


def vlen_utf8(values: np.ndarray) -> np.ndarray:
    """numcodecs' vlen-utf8 encoding: a u4 count, then a u4 length and the bytes of each string."""
    encoded = [str(value).encode("utf-8") for value in values.reshape(-1)]
    parts = [np.uint32(len(encoded)).tobytes()]
    for item in encoded:
        parts += [np.uint32(len(item)).tobytes(), item]
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


def _encode(codec: dict, data: Any) -> Any:
    name = codec["name"]
    configuration = codec.get("configuration", {})
    if name == "bytes":
        if configuration.get("endian") == "big" and data.dtype.itemsize > 1:
            data = data.astype(data.dtype.newbyteorder(">"))
        return np.ascontiguousarray(data).reshape(-1).view(np.uint8)
    if name == "blosc":
        return blosc.compress(bytes(data), typesize=int(configuration.get("typesize", 1)) or 1,
                              clevel=int(configuration.get("clevel", 5)),
                              shuffle=_SHUFFLES[configuration.get("shuffle", "shuffle")],
                              cname=configuration.get("cname", "lz4"))
    if name == "vlen-utf8":
        return vlen_utf8(data)
    raise UnsupportedError(f"arrayio: no encoder for the codec {name!r}")


def encode_chunk(array: Array, coords: tuple[int, ...]) -> Any:
    """Chunk ``coords`` of ``array`` as stored bytes: read, padded to full size, through the array's codecs."""
    data: Any = array.full_chunk(coords)
    for codec in array.codecs:
        data = _encode(codec, data)
    return data
