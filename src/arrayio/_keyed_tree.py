"""The tree of a key -> 1-D array store (both keyed layouts): one array per key, ``/`` making groups.

Each key's array is a plain little-endian byte range of the file, so every
chunk is referencable (row blocks of at most ``MAX_CHUNK_BYTES``). The tree
is lazy: children are made when asked for, so a store of a million keys
costs the views one array object at a time, not a million.

The key rule (:func:`zarr_path_of_key`) keeps a tree sequence's
``table/column`` keys as they are: ``nodes/time`` is the array ``time`` in the
group ``nodes``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, unquote

import numpy as np

from ._binary import release_pages
from ._keyed_dims import dimension_names
from ._tree import Array, ChunkRef, Group, check_dtype, rows_per_chunk

__all__ = ["UNMAPPED_GROUP", "key_of_zarr_path", "keyed_tree", "unmappable_keys", "zarr_path_of_key"]

UNMAPPED_GROUP = "%"
_RESERVED = frozenset({".", "..", "zarr.json"})  # node names Zarr forbids, or that would shadow a document
_SAFE = "!$&'()*+,;=:@~ -"  # kept as they are in path segments; "%" and "/" never are
_PLAIN = re.compile(r"[A-Za-z0-9_.~!$&'()*+,;=:@ /-]*")  # keys that quoting leaves as they are


def _segment(name: str) -> str:
    return quote(name, safe=_SAFE)


def unmappable_keys(keys: Iterable[str]) -> set[str]:
    """The keys that cannot map one to one onto zarr paths (see :func:`zarr_path_of_key`)."""
    keys = list(keys)
    groups = {"/".join(key.split("/")[:depth]) for key in keys for depth in range(1, key.count("/") + 1)}
    bad = set()
    for key in keys:
        segments = key.split("/")
        if key in groups or any(not part or part in _RESERVED or part.startswith("__") for part in segments):
            bad.add(key)
    return bad


def zarr_path_of_key(key: str, unmappable: bool = False) -> str:
    """The zarr path of a key of a keyed store.

    The rule: the key's ``/``-separated segments become nested groups, each
    segment percent-encoded as a URL path segment (``%`` -> ``%25``; letters,
    digits, space and ``-._~!$&'()*+,;=:@`` stay as they are). A key that
    cannot map one to one (an empty, ``.``, ``..``, ``zarr.json`` or
    ``__``-prefixed segment, or a key that is also another key's group, such
    as ``a`` next to ``a/b``) is the array named by its whole percent-encoded
    key (``/`` -> ``%2F``, ``.`` -> ``%2E``, ``_`` -> ``%5F``) in the root
    group ``%``, a name no mapped key can produce.
    """
    if unmappable:
        return f"{UNMAPPED_GROUP}/" + quote(key, safe="").replace(".", "%2E").replace("_", "%5F")
    if _PLAIN.fullmatch(key):  # the common case, and a million-key store pays for it per key
        return key
    return "/".join(_segment(part) for part in key.split("/"))


def key_of_zarr_path(path: str) -> str:
    """The key behind a zarr array path (the inverse of :func:`zarr_path_of_key`)."""
    path = path.strip("/")
    if path.startswith(f"{UNMAPPED_GROUP}/"):
        return unquote(path[len(UNMAPPED_GROUP) + 1:])
    return "/".join(unquote(part) for part in path.split("/"))


def _key_array(store: Any, key: str, dimension: str | None) -> Array:
    """The array of ``key``; its dimension ``dim_<length>`` unless ``dimension`` names it."""
    info = store.info(key)
    dtype = check_dtype(np.dtype(info.dtype).newbyteorder("<"), f"key {key!r}")  # both layouts store little endian
    offset, _length = store.extent(key)
    count = info.shape[0]
    itemsize = dtype.itemsize
    rows = min(rows_per_chunk(itemsize), max(count, 1))
    source = store.source
    file_size = source.size

    def extent(coords: tuple[int, ...]) -> tuple[int, int]:
        start = coords[0] * rows
        return offset + start * itemsize, (min(start + rows, count) - start) * itemsize

    def read(coords: tuple[int, ...]) -> np.ndarray:
        start, length = extent(coords)
        return np.frombuffer(source.view(start, length, f"array {key!r}"), dtype=dtype)

    def reference(coords: tuple[int, ...]) -> ChunkRef | None:
        # A short last chunk is referenced at full size when the file goes on after it: a reader
        # decodes the whole chunk and keeps only the part inside the array.
        start = offset + coords[0] * rows * itemsize
        full = rows * itemsize
        return ChunkRef(start, full) if start + full <= file_size else None

    def release(coords: tuple[int, ...]) -> None:
        release_pages(source, *extent(coords))

    return Array((count,), dtype, (rows,), (dimension or f"dim_{count}",), {"key": key}, read, reference=reference,
                 release=release)


class _Children(Mapping):
    """The children of one group of a keyed tree, made when asked for.

    ``table`` is the group's name ("" for the root and the group of unmappable keys): the
    dimension names of its arrays follow :func:`arrayio._keyed_dims.dimension_names`, worked
    out once for the group when its first array is made.
    """

    def __init__(self, store: Any, keys: list[str], names: dict, table: str = "") -> None:
        self._store = store
        self._keys = keys
        self._names = names  # name -> index of a key, or the dict of a subgroup
        self._table = table
        self._dimensions: dict[str, str] | None = None

    def _dimension(self, name: str) -> str | None:
        if not self._table:  # keys outside a table: dim_<length>, no need to look at the others
            return None
        if self._dimensions is None:
            lengths = {child: self._store.info(self._keys[found]).shape[0]
                       for child, found in self._names.items() if not isinstance(found, dict)}
            self._dimensions = dimension_names(self._table, lengths)
        return self._dimensions[name]

    def __getitem__(self, name: str) -> Group | Array:
        found = self._names[name]
        if isinstance(found, dict):
            table = "" if found is self._names.get(UNMAPPED_GROUP) and not self._table else unquote(name)
            return Group({}, _Children(self._store, self._keys, found, table))
        return _key_array(self._store, self._keys[found], self._dimension(name))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def keyed_tree(store: Any) -> Group:
    """The tree of an open keyed store: one 1-D array per key, at its :func:`zarr_path_of_key`."""
    keys = list(store)
    bad = unmappable_keys(keys)
    names: dict = {}
    for index, key in enumerate(keys):
        path = zarr_path_of_key(key, key in bad).split("/")
        node = names
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = index
    return Group({"arrayio_format": store.format}, _Children(store, keys, names))
