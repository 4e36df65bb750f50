"""VirtualiZarr views of any arrayio file: a parser (the VirtualiZarr 2 protocol) over the array model.

``Parser()`` is called by ``virtualizarr.open_virtual_dataset(url, parser=Parser(), registry=registry)``
with the file's URL and the user's ``ObjectStoreRegistry``. It reads the
file's header and index in byte ranges through the registry's object store
(the user's, with their credentials: arrayio's ranged reader over a small
fsspec filesystem wrapping that store), builds the file's tree (:func:`arrayio._tree.tree_of`) and returns a
``ManifestStore``: each chunk of an array is a manifest entry (the URL, the
byte offset and length of the chunk in the file) and each array keeps the
codec chain that decodes those bytes (raw little-endian bytes, a Blosc1
frame). No byte of array data is copied.

Some chunks are not byte ranges of the file but computed from it (packed
triangles, JPEG frames, values gathered from records). A manifest cannot hold
them, so ``Parser()`` refuses an array with such chunks and names it;
``Parser(computed="skip")`` leaves those arrays out, lists them in
``parser.left_out`` and warns; :func:`open_virtual_dataset` and
:func:`open_virtual_datatree` load them (through the same object store) next
to the virtual ones, as VirtualiZarr's ``loadable_variables`` do; and
:func:`to_icechunk` writes a file into an Icechunk store with a reference for
every referencable chunk and the computed chunks stored one at a time.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import fsspec
import numpy as np
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from virtualizarr.manifests.utils import create_v3_array_metadata

from ._tree import Array, Group, tree_of
from .errors import UnsupportedError
from .xarray_backend import group_at

__all__ = ["ComputedChunksWarning", "Parser", "open_virtual_dataset", "open_virtual_datatree", "to_icechunk"]


class ComputedChunksWarning(UserWarning):
    """Arrays whose chunks are computed from the file were left out of a manifest (``Parser(computed="skip")``)."""


Coords = tuple[int, ...]


@dataclass
class _Manifests:
    """What one pass over a file's tree gives: the manifest group, and the arrays with computed chunks
    (path below the opened group -> the array and the coordinates of those chunks)."""

    group: ManifestGroup
    computed: dict[str, tuple[Array, list[Coords]]] = field(default_factory=dict)


def _computed_chunk(array: Array) -> Coords | None:
    """The first chunk of ``array`` that is computed rather than a byte range of the file, or None."""
    for coords in np.ndindex(*array.grid):
        if array.chunk_reference(coords) is None:
            return coords
    return None


def _manifest_array(array: Array, url: str, partial: bool) -> tuple[ManifestArray | None, list[Coords]]:
    """The array with a manifest entry per referencable chunk, and the coordinates of its computed chunks.

    Without ``partial`` the first computed chunk ends the pass and no manifest is made: a manifest
    entry left empty reads as the fill value, which only a writer that stores those chunks itself
    (:func:`to_icechunk`) may allow.
    """
    # An empty array has no chunks, but VirtualiZarr 2.5's ChunkManifest.iter_refs (used by to_icechunk)
    # fails on a zero-size grid (fixed upstream in zarr-developers/VirtualiZarr#1062, not yet released):
    # such a manifest holds one chunk with the empty path, VirtualiZarr's "not stored", never asked for.
    table = tuple(max(size, 1) for size in array.grid)
    paths = np.full(table, "", dtype=np.dtypes.StringDType())
    offsets = np.zeros(table, dtype=np.uint64)
    lengths = np.zeros(table, dtype=np.uint64)
    computed: list[Coords] = []
    for coords in np.ndindex(*array.grid):
        ref = array.chunk_reference(coords)
        if ref is None:
            computed.append(coords)
            if not partial:
                return None, computed
            continue
        paths[coords], offsets[coords], lengths[coords] = url, ref.offset, ref.length
    manifest = ChunkManifest.from_arrays(paths=paths, offsets=offsets, lengths=lengths, validate_paths=False)
    metadata = create_v3_array_metadata(
        shape=tuple(array.shape), data_type=np.dtypes.StringDType() if array.strings else np.dtype(array.dtype),
        chunk_shape=tuple(array.chunks), fill_value=array.fill_value, codecs=[dict(codec) for codec in array.codecs],
        dimension_names=tuple(array.dimension_names), attributes=dict(array.attributes))
    return ManifestArray(metadata=metadata, chunkmanifest=manifest), computed


def _manifests(group: Group, url: str, partial: bool) -> _Manifests:
    """The manifest group of ``group`` and its arrays with computed chunks (left out unless ``partial``)."""
    arrays: dict[str, ManifestArray] = {}
    groups: dict[str, ManifestGroup] = {}
    computed: dict[str, tuple[Array, list[Coords]]] = {}
    for name, child in group.children.items():
        if isinstance(child, Group):
            below = _manifests(child, url, partial)
            groups[name] = below.group
            computed.update({f"{name}/{path}": found for path, found in below.computed.items()})
            continue
        virtual, chunks = _manifest_array(child, url, partial)
        if virtual is not None:
            arrays[name] = virtual
        if chunks:
            computed[name] = (child, chunks)
    return _Manifests(ManifestGroup(arrays=arrays, groups=groups, attributes=dict(group.attributes)), computed)


def _describe(computed: dict[str, tuple[Array, list[Coords]]], where: str) -> str:
    return "; ".join(f"{'/'.join(part for part in (where.strip('/'), path) if part)} (chunk {chunks[0]}: "
                     f"{array.why_computed})" for path, (array, chunks) in computed.items())


class _ObjectStoreFiles(fsspec.AbstractFileSystem):
    """The objects of one obspec store (the user's, from the registry) as an fsspec filesystem.

    arrayio reads an fsspec file in byte ranges (the header and index, then what is asked for), so
    a file opened here costs a few ranged GETs of the user's store, never a whole-object read.
    """

    cachable = False  # one per store object: fsspec's instance cache cannot key on a store

    def __init__(self, store: Any, url: str) -> None:
        super().__init__()
        self.store = store
        self.url = url

    def info(self, path: str, **kwargs: Any) -> dict:
        """Size and ETag from one HEAD of the object."""
        meta = self.store.head(path)
        return {"name": path, "size": int(meta["size"]), "type": "file", "ETag": meta.get("e_tag")}

    def cat_file(self, path: str, start: int | None = None, end: int | None = None, **kwargs: Any) -> bytes:
        """Bytes ``start:end`` of the object: one ranged GET."""
        if start is None and end is None:
            return bytes(self.store.get(path).bytes())
        size = None if start is not None and end is not None else self.info(path)["size"]
        return bytes(self.store.get_range(path, start=start or 0, end=end if end is not None else size))

    def unstrip_protocol(self, name: str) -> str:
        """The URL the user gave, for messages."""
        return self.url


class _Opened:
    """The file at ``url`` opened with arrayio through the registry's object store, and its tree."""

    def __init__(self, url: str, registry: ObjectStoreRegistry) -> None:
        import arrayio

        try:
            store, path = registry.resolve(url)
        except ValueError:
            store = None
        if store is None:
            raise UnsupportedError(f"arrayio.virtualizarr: the registry has no object store for {url}; register "
                                   "one for its prefix, e.g. ObjectStoreRegistry({'file://': LocalStore()})") from None
        self.reader = arrayio.open(_ObjectStoreFiles(store, url).open(path, "rb", cache_type="none"))
        try:
            self.tree = tree_of(self.reader)
        except BaseException:
            self.reader.close()
            raise

    def __enter__(self) -> _Opened:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.reader.close()


class Parser:
    """A VirtualiZarr 2 parser of a file of any format arrayio reads.

    ``group`` makes that group of the file the root of the ManifestStore
    (VirtualiZarr opens the root group as a Dataset). ``computed="error"``
    (the default) refuses arrays with computed chunks and names them;
    ``"skip"`` leaves them out, lists their paths in ``left_out`` and warns
    with :class:`ComputedChunksWarning`.
    """

    def __init__(self, group: str | None = None, computed: Literal["error", "skip"] = "error") -> None:
        if computed not in ("error", "skip"):
            raise ValueError(f"computed must be 'error' or 'skip', not {computed!r}")
        self.group = group
        self.computed = computed
        self.left_out: list[str] = []

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """The ManifestStore of the file at ``url``, read through ``registry``'s object store."""
        with _Opened(url, registry) as opened:
            manifests = _manifests(group_at(opened.tree, self.group), url, partial=False)
        listed = _describe(manifests.computed, self.group or "")
        self.left_out = list(manifests.computed)
        if manifests.computed and self.computed == "error":
            raise UnsupportedError(
                f"arrayio.virtualizarr: {url}: these arrays have chunks computed from the file, not byte ranges "
                f"of it, so no manifest can reference them: {listed}. Parser(computed='skip') leaves them out; "
                "arrayio.virtualizarr.open_virtual_dataset loads them beside the virtual arrays, and "
                "arrayio.virtualizarr.to_icechunk stores them as Icechunk chunks")
        if manifests.computed:
            warnings.warn(f"arrayio.virtualizarr: {url}: left out arrays with computed chunks: {listed}",
                          ComputedChunksWarning, stacklevel=2)
        return ManifestStore(group=manifests.group, registry=registry)


def _loaded(array: Array) -> xr.Variable:
    """The whole of a computed array, read chunk by chunk, as an in-memory variable."""
    values = np.empty(tuple(array.shape), dtype=array.dtype)
    for coords in np.ndindex(*array.grid):
        values[array.region(coords)] = array.read(coords)
    return xr.Variable(tuple(array.dimension_names), values, attrs=dict(array.attributes))


def _groups_with_loaded(url: str, registry: ObjectStoreRegistry, group: str | None, deep: bool,
                        ) -> Iterator[tuple[str, dict[str, xr.Variable]]]:
    """(group path below ``group``, {name: loaded variable}) for the computed arrays of ``group``
    (and of every group below it when ``deep``)."""
    with _Opened(url, registry) as opened:
        top = group_at(opened.tree, group)
        for path, node in top.walk() if deep else [("", top)]:
            if not isinstance(node, Group):
                continue
            loaded = {name: _loaded(child) for name, child in node.children.items()
                      if isinstance(child, Array) and _computed_chunk(child) is not None}
            if loaded:
                yield path, loaded


def open_virtual_dataset(url: str, registry: ObjectStoreRegistry, *, group: str | None = None) -> xr.Dataset:
    """One group of the file as a VirtualiZarr dataset: virtual arrays, and the computed ones loaded."""
    import virtualizarr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComputedChunksWarning)  # loaded just below, not left out
        dataset = virtualizarr.open_virtual_dataset(url, registry=registry, parser=Parser(group, computed="skip"),
                                                    loadable_variables=[])
    for _path, loaded in _groups_with_loaded(url, registry, group, deep=False):
        dataset = dataset.assign(loaded)
    return dataset


def open_virtual_datatree(url: str, registry: ObjectStoreRegistry, *, group: str | None = None) -> xr.DataTree:
    """Every group of the file as a VirtualiZarr DataTree: virtual arrays, and the computed ones loaded."""
    import virtualizarr

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ComputedChunksWarning)
        tree = virtualizarr.open_virtual_datatree(url, registry=registry, parser=Parser(group, computed="skip"),
                                                  loadable_variables=[])
    for path, loaded in _groups_with_loaded(url, registry, group, deep=True):
        node = tree[path] if path else tree
        node.dataset = node.to_dataset().assign(loaded)
    return tree


def to_icechunk(url: str, registry: ObjectStoreRegistry, store: Any, *, group: str | None = None) -> dict[str, int]:
    """Write the file (or its group ``group``) into an Icechunk session's ``store``; commit the session after.

    Every referencable chunk becomes a virtual reference to ``url``; every computed chunk is read
    through ``registry``'s store and written as an Icechunk chunk, one chunk at a time, so an array
    with one computed chunk (a short last Blosc chunk) is still referenced everywhere else, and
    memory holds one chunk. Returns {array path: chunks written} for the arrays with computed chunks.
    """
    import zarr

    with _Opened(url, registry) as opened:
        manifests = _manifests(group_at(opened.tree, group), url, partial=True)
        tree = ManifestStore(group=manifests.group, registry=registry).to_virtual_datatree(loadable_variables=[])
        with warnings.catch_warnings():
            # VirtualiZarr warns about a dataset of no virtual reference: its chunks are written next.
            warnings.filterwarnings("ignore", "Attempting to write an entirely non-virtual", UserWarning)
            tree.vz.to_icechunk(store)
        for path, (array, chunks) in manifests.computed.items():
            target = zarr.open_array(store=store, path=path, mode="r+", zarr_format=3)
            for coords in chunks:
                target[array.region(coords)] = array.read(coords)
    return {path: len(chunks) for path, (_array, chunks) in manifests.computed.items()}
