"""A read-only zarr-python 3 ``Store`` presenting any arrayio file as a Zarr v3 group, in place.

``open_store(target)`` opens the file with its format's reader and serves the
tree its format describes (``arrayio._tree``): no byte of array data is read
until zarr asks for a chunk, and then only that chunk's bytes. A referencable
chunk is served as the file's own bytes (a zero-copy view of a mapped file for
raw values, the stored Blosc frame for Blosc chunks, decoded by zarr's codec);
a computed chunk is read and encoded with the array's codecs. Documents are
made when asked for, so a file of a million arrays opens without a million
``zarr.json`` documents in memory. What each format becomes: docs/zarr.md.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import numpy as np
from zarr.abc.store import (
    ByteRequest,
    OffsetByteRequest,
    RangeByteRequest,
    Store,
    SuffixByteRequest,
)
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from . import _tree
from ._codecs import encode_chunk
from ._keyed_tree import UNMAPPED_GROUP, key_of_zarr_path, unmappable_keys, zarr_path_of_key
from ._sources import is_url
from ._tree import Array, Group, jsonable, tree_of
from .errors import UnsupportedError

__all__ = [
    "MAX_CHUNK_BYTES",
    "UNMAPPED_GROUP",
    "FormatStore",
    "ReadOnlyError",
    "jsonable",
    "key_of_zarr_path",
    "open_store",
    "tree_of",
    "unmappable_keys",
    "zarr_path_of_key",
]

MAX_CHUNK_BYTES = _tree.MAX_CHUNK_BYTES  # the model's limit; set arrayio._tree.MAX_CHUNK_BYTES to change it
_CACHED_NODES = 4096  # nodes of a lazy tree kept by path (a million-key file is walked, not held)


class ReadOnlyError(UnsupportedError):
    """A write, delete or clear was asked of a read-only arrayio zarr store."""


def open_reader(target: Any, storage_options: dict | None = None) -> Any:
    """The format reader of ``target`` (path, bytes, file object or URL) through ``arrayio.open``."""
    import arrayio

    options = {} if storage_options is None else {"storage_options": storage_options}
    return arrayio.open(target, **options)


# --------------------------------------------------------------------------- the store

def _sliced(data: Any, byte_range: ByteRequest | None) -> Any:
    if byte_range is None:
        return data
    size = len(data)
    if isinstance(byte_range, RangeByteRequest):
        return data[byte_range.start:min(byte_range.end, size)]
    if isinstance(byte_range, OffsetByteRequest):
        return data[byte_range.offset:]
    if isinstance(byte_range, SuffixByteRequest):
        return data[max(size - byte_range.suffix, 0):]
    raise TypeError(f"unexpected byte range {byte_range!r}")


class FormatStore(Store):
    """A read-only Zarr v3 store over one open arrayio reader (see :func:`open_store`)."""

    supports_writes = False
    supports_deletes = False
    supports_partial_writes = False
    supports_listing = True

    def __init__(self, reader: Any, name: str = "<file>", reopen: tuple | None = None) -> None:
        super().__init__(read_only=True)
        self.reader = reader
        self.name = name
        self._reopen = reopen
        self.root = tree_of(reader)
        self._source = getattr(reader, "source", None)
        self._nodes: OrderedDict[str, Group | Array | None] = OrderedDict()
        self._nodes_lock = threading.Lock()
        # Ranged sources (file objects, remote files) seek and read: one chunk read at a time.
        self._lock = threading.Lock() if getattr(getattr(reader, "source", None), "buffer", True) is None else None
        self._is_open = True

    def __eq__(self, other: object) -> bool:
        return other is self

    def __reduce__(self) -> tuple:
        # dask.distributed ships the store to workers: each reopens the path or URL.
        if self._reopen is None:
            raise TypeError(f"arrayio.zarr: a store over {self.name} (not a path or URL) cannot be pickled")
        return open_store, self._reopen

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return f"<arrayio.zarr.FormatStore {self.name}>"

    def __str__(self) -> str:
        return f"arrayio://{self.name}"

    def _check_writable(self) -> None:
        raise ReadOnlyError(f"arrayio.zarr: the store over {self.name} is read-only; "
                            f"`arrayio convert {self.name} OUT.zarr` makes a writable copy")

    def close(self) -> None:
        """Close the store and the reader behind it."""
        super().close()
        self.reader.close()

    # -- reading

    def node(self, path: str) -> Group | Array | None:
        """The group or array at ``path`` (kept in a bounded cache: lazy trees make nodes when asked)."""
        with self._nodes_lock:
            if path in self._nodes:
                self._nodes.move_to_end(path)
                return self._nodes[path]
        found = self.root.find(path)
        with self._nodes_lock:
            self._nodes[path] = found
            while len(self._nodes) > _CACHED_NODES:
                self._nodes.popitem(last=False)
        return found

    def document(self, key: str) -> bytes | None:
        """The ``zarr.json`` named by ``key``, or None."""
        if key == "zarr.json":
            path = ""
        elif key.endswith("/zarr.json"):
            path = key[:-len("/zarr.json")]
        else:
            return None
        node = self.node(path)
        return None if node is None else json.dumps(node.metadata()).encode()

    def array_at(self, key: str) -> tuple[Array, tuple[int, ...]] | None:
        """(array, chunk coordinates) named by a chunk key, or None."""
        parts = key.split("/")
        for ndim in range(min(len(parts) - 1, 32) + 1):
            if len(parts) < ndim + 1 or parts[len(parts) - ndim - 1] != "c":
                continue
            path = "/".join(parts[:len(parts) - ndim - 1])
            array = self.node(path)
            if not isinstance(array, Array) or len(array.shape) != ndim:
                continue
            try:
                coords = tuple(int(part) for part in parts[len(parts) - ndim:])
            except ValueError:
                return None
            if all(0 <= index < count for index, count in zip(coords, array.grid)):
                return array, coords
            return None
        return None

    def _stored_chunk(self, array: Array, coords: tuple[int, ...]) -> Any:
        reference = array.chunk_reference(coords)
        if reference is None:
            return encode_chunk(array, coords)
        if array.stored is not None:
            return array.stored(coords)
        if self._source is None:
            raise UnsupportedError(f"arrayio.zarr: the reader of {self.name} has no source to read chunks from")
        return self._source.view(reference.offset, reference.length, f"chunk {coords} of an array")

    def chunk_bytes(self, key: str) -> Any:
        """The stored bytes of a metadata document or chunk, or None when the key names nothing."""
        document = self.document(key)
        if document is not None:
            return document
        found = self.array_at(key)
        if found is None:
            return None
        array, coords = found
        if self._lock is None:
            return self._stored_chunk(array, coords)
        with self._lock:
            return self._stored_chunk(array, coords)

    async def get(self, key: str, prototype: BufferPrototype | None = None,
                  byte_range: ByteRequest | None = None) -> Buffer | None:
        """The bytes stored under ``key`` (a document or a chunk), or None."""
        prototype = prototype or default_buffer_prototype()
        if self._lock is None:
            # Mapped bytes: chunks are views or CPU-bound reads, fastest one after another in the loop
            # (readers in threads contend for the GIL and for Blosc's own threads).
            data = self.chunk_bytes(key)
        else:
            data = await asyncio.to_thread(self.chunk_bytes, key)
        if data is None:
            return None
        data = _sliced(data, byte_range)
        return prototype.buffer.from_array_like(np.frombuffer(data, dtype=np.uint8))

    async def get_partial_values(self, prototype: BufferPrototype,
                                 key_ranges: Iterable[tuple[str, ByteRequest | None]]) -> list[Buffer | None]:
        """Several ``get`` calls at once."""
        return list(await asyncio.gather(*(self.get(key, prototype, byte_range) for key, byte_range in key_ranges)))

    async def exists(self, key: str) -> bool:
        """True when ``key`` names a document or a chunk."""
        return self.document(key) is not None or self.array_at(key) is not None

    async def set(self, key: str, value: Buffer) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def delete(self, key: str) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    async def clear(self) -> None:
        """Refused: the store is read-only."""
        self._check_writable()

    def _keys(self) -> Iterator[str]:
        for path, node in self.root.walk():
            yield f"{path}/zarr.json" if path else "zarr.json"
            if isinstance(node, Array):
                for coords in np.ndindex(*node.grid):
                    yield "/".join([path, "c", *map(str, coords)])

    async def list(self) -> AsyncIterator[str]:
        """Every document and chunk key."""
        for key in self._keys():
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Every key starting with ``prefix``."""
        for key in self._keys():
            if key.startswith(prefix):
                yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """The names directly under ``prefix`` (documents, children, the ``c`` of arrays)."""
        node = self.node(prefix.rstrip("/"))
        if node is None:
            return
        yield "zarr.json"
        if isinstance(node, Group):
            for name in node.children:
                yield name
        elif any(node.grid) or not node.shape:
            yield "c"

    async def getsize(self, key: str) -> int:
        """Stored size of ``key`` in bytes."""
        data = self.document(key)
        if data is not None:
            return len(data)
        found = self.array_at(key)
        if found is None:
            raise FileNotFoundError(key)
        array, coords = found
        reference = array.chunk_reference(coords)
        return reference.length if reference is not None else math.prod(array.chunks) * array.dtype.itemsize


def open_store(target: Any, storage_options: dict | None = None) -> FormatStore:
    """A read-only Zarr v3 store presenting the arrayio file ``target`` (path, bytes, file or URL) in place."""
    reader = open_reader(target, storage_options)
    try:
        name = target if isinstance(target, str) else getattr(getattr(reader, "source", None), "name", "<data>")
        # Workers reopen the file: a local path must not depend on their working directory.
        where = os.fspath(target) if isinstance(target, (str, os.PathLike)) else None
        if where is not None and not is_url(where):
            where = os.path.abspath(where)
        reopen = (where, storage_options) if where is not None else None
        return FormatStore(reader, str(name), reopen)
    except BaseException:
        reader.close()
        raise

