"""The xarray backend engine ``"arrayio"``: ``xr.open_dataset(path_or_url, engine="arrayio")`` for every format.

Registered through the ``xarray.backends`` entry point, it reads the array model
of the file (:func:`arrayio._tree.tree_of`): one group becomes a Dataset whose
variables are that group's arrays, with the tree's dimension names and
attributes; ``xr.open_datatree`` gives every group. Variables are lazy: an
index reads only the model chunks it overlaps (``read(coords)``), and
``chunks={}`` gives one dask chunk per model chunk. No zarr is involved.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np
import xarray as xr
from xarray.backends import BackendArray, BackendEntrypoint
from xarray.core import indexing

from ._tree import Array, Group, tree_of
from .errors import UnsupportedError

__all__ = ["ArrayioBackendEntrypoint", "TreeBackendArray", "group_at"]


class TreeBackendArray(BackendArray):
    """One model array as xarray's lazy backend array: basic indexing reads the chunks it overlaps."""

    def __init__(self, array: Array, lock: Any) -> None:
        self.array = array
        self.shape = tuple(array.shape)
        self.dtype = array.dtype
        self._lock = lock

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(key, self.shape, indexing.IndexingSupport.BASIC, self._read)

    def _read(self, key: tuple[Any, ...]) -> np.ndarray:
        """The values at ``key`` (integers and slices, one per axis): one read per overlapped chunk."""
        spans = []
        for axis_key, size in zip(key, self.shape):
            if isinstance(axis_key, slice):
                start, stop, step = axis_key.indices(size)
                spans.append((start, stop, step, False))
            else:
                index = int(axis_key)
                spans.append((index, index + 1, 1, True))
        out = np.empty(tuple(len(range(*span[:3])) for span in spans), dtype=self.dtype)
        if out.size:
            for coords in _chunks_overlapping(self.array.chunks, spans):
                self._copy_chunk(coords, spans, out)
        return out[tuple(0 if span[3] else slice(None) for span in spans)]

    def _copy_chunk(self, coords: tuple[int, ...], spans: list, out: np.ndarray) -> None:
        """Copy the selected indices inside chunk ``coords`` into ``out``; a chunk that holds none
        (a step longer than the chunk skips it) is not read."""
        source, target = [], []
        for (start, stop, step, _scalar), part in zip(spans, self.array.region(coords)):
            first = start if start >= part.start else start + -(-(part.start - start) // step) * step
            last = min(stop, part.stop)
            if first >= last:
                return
            source.append(slice(first - part.start, last - part.start, step))
            offset = (first - start) // step
            target.append(slice(offset, offset + len(range(first, last, step))))
        with self._lock:
            block = np.asarray(self.array.read(coords))
        out[tuple(target)] = block[tuple(source)]


def _chunks_overlapping(chunks: tuple[int, ...], spans: list) -> Iterable[tuple[int, ...]]:
    """Coordinates of the chunks between the first and the last selected index of every axis."""
    ranges = []
    for chunk, (start, stop, step, _scalar) in zip(chunks, spans):
        last = start + (len(range(start, stop, step)) - 1) * step
        ranges.append(range(start // chunk, last // chunk + 1))
    return itertools.product(*ranges)


def group_at(tree: Group, path: str | None) -> Group:
    """The group at ``path`` ("", "/", "a/b" or "/a/b") of ``tree``; a clear error naming the groups there are."""
    where = (path or "").strip("/")
    node = tree.find(where)
    if isinstance(node, Group):
        return node
    if node is None:
        groups = [name or "/" for name, child in tree.walk() if isinstance(child, Group)]
        raise UnsupportedError(f"arrayio: no group {path!r} in the file; its groups are {', '.join(groups)}")
    parent = where.rpartition("/")[0] or "/"
    raise UnsupportedError(f"arrayio: {path!r} is an array, not a group; open its group {parent!r} instead")


def _variable(array: Array, lock: Any) -> xr.Variable:
    data = indexing.LazilyIndexedArray(TreeBackendArray(array, lock))
    encoding = {"chunks": tuple(array.chunks),
                "preferred_chunks": dict(zip(array.dimension_names, array.chunks))}
    return xr.Variable(tuple(array.dimension_names), data, attrs=dict(array.attributes), encoding=encoding)


def _dataset(group: Group, where: str, drop_variables: Iterable[str] | None, lock: Any) -> xr.Dataset:
    dropped = set(drop_variables or ())
    variables = {name: _variable(child, lock) for name, child in group.children.items()
                 if isinstance(child, Array) and name not in dropped}
    try:
        return xr.Dataset(variables, attrs=dict(group.attributes))
    except ValueError as error:  # arrays of one group that disagree on a dimension's length
        raise UnsupportedError(f"arrayio: the arrays of group {where or '/'!r} do not form one xarray Dataset: "
                               f"{error}") from None


def _open_tree(filename_or_obj: Any, storage_options: dict | None) -> tuple[Any, Group, Any]:
    """(reader, tree, lock): the lock serialises the chunk reads of a ranged source (it seeks, then reads)."""
    import arrayio

    if isinstance(filename_or_obj, os.PathLike):
        filename_or_obj = os.fspath(filename_or_obj)
    reader = arrayio.open(filename_or_obj, storage_options=storage_options)
    try:
        tree = tree_of(reader)
    except BaseException:
        reader.close()
        raise
    mapped = getattr(getattr(reader, "source", None), "buffer", True) is not None
    return reader, tree, contextlib.nullcontext() if mapped else threading.Lock()


class ArrayioBackendEntrypoint(BackendEntrypoint):
    """``engine="arrayio"``: a file of any format arrayio reads (a path, a URL or an fsspec file)."""

    description = "Open any file arrayio reads, lazily, through its array model"
    url = "https://github.com/arrayio/arrayio/blob/main/docs/zarr.md"
    open_dataset_parameters = ("filename_or_obj", "drop_variables", "group", "storage_options")
    supports_groups = True  # open_datatree and open_groups_as_dict: xarray guesses only such engines for them

    def open_dataset(self, filename_or_obj: Any, *, drop_variables: Iterable[str] | None = None,
                     group: str | None = None, storage_options: dict | None = None) -> xr.Dataset:
        """The arrays of one group of the file (the root by default) as a lazy Dataset."""
        reader, tree, lock = _open_tree(filename_or_obj, storage_options)
        try:
            dataset = _dataset(group_at(tree, group), group or "", drop_variables, lock)
        except BaseException:
            reader.close()
            raise
        dataset.set_close(reader.close)
        return dataset

    def open_groups_as_dict(self, filename_or_obj: Any, *, drop_variables: Iterable[str] | None = None,
                            group: str | None = None, storage_options: dict | None = None,
                            ) -> dict[str, xr.Dataset]:
        """Every group at and below ``group`` as a lazy Dataset, keyed by its path ("/" for the root)."""
        reader, tree, lock = _open_tree(filename_or_obj, storage_options)
        try:
            top = group_at(tree, group)
            base = "/" + (group or "").strip("/")
            datasets = {}
            for path, node in top.walk():
                if isinstance(node, Group):
                    where = "/".join(part for part in (base.strip("/"), path) if part)
                    datasets["/" + path] = _dataset(node, where, drop_variables, lock)
        except BaseException:
            reader.close()
            raise
        datasets["/"].set_close(reader.close)
        return datasets

    def open_datatree(self, filename_or_obj: Any, *, drop_variables: Iterable[str] | None = None,
                      group: str | None = None, storage_options: dict | None = None) -> xr.DataTree:
        """Every group at and below ``group`` as a lazy DataTree."""
        datasets = self.open_groups_as_dict(filename_or_obj, drop_variables=drop_variables, group=group,
                                            storage_options=storage_options)
        tree = xr.DataTree.from_dict(datasets)
        tree.set_close(datasets["/"]._close)
        return tree

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """True for a path or URL whose extension a registered format owns, or a local file whose
        magic bytes one does (a file under another format's extension is claimed by its magic)."""
        from ._registry import FORMATS, detect

        if not isinstance(filename_or_obj, (str, os.PathLike)):
            return False
        name = os.fsdecode(filename_or_obj)
        suffix = os.path.splitext(name.split("?")[0])[1].lower()
        if any(suffix in spec.extensions for spec in FORMATS.values()):
            return True
        try:
            return os.path.isfile(name) and detect(name) is not None
        except OSError:
            return False
