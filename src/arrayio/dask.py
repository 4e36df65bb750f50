"""dask collections over the array model of any file (optional extra ``dask``).

    to_dask(target, key=None, storage_options=None)   a dask.array whose chunks follow the file
    to_dask_tree(target, storage_options=None)        {path: dask.array} for every array of the file
    validate_many(targets, client=None)               {target: [problem, ...]} validated on a cluster

Task graphs hold only the location (path or URL), storage options, byte
offsets, counts and dtypes: never data. Each task reads its own range where
it runs; a worker keeps a few opened files so the header and index of a
file are read once per worker, not once per task.
"""

from __future__ import annotations

import importlib
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import numpy as np

from . import limits
from ._optional import require
from ._registry import spec_of_file
from ._remote._settings import checked_options
from ._sources import RemoteFile, is_url, resolve, target_list
from ._tree import Array, Group, tree_of
from .errors import FormatError, Problem, UnsupportedError

__all__ = ["BLOCK_BYTES", "MAX_BLOCKS", "location_of", "reach", "to_dask", "to_dask_tree", "validate_many"]

# An uncompressed array is split into row blocks of at most this many bytes (one byte range each).
BLOCK_BYTES = 64 << 20
# Blocks of one array at most: a file of a million tiny chunks gets runs of chunks per task, not a
# million tasks (a graph that size takes the scheduler minutes and gigabytes).
MAX_BLOCKS = 10_000
# Opened files a worker process keeps (least recently used closed first).
_OPEN_FILES = 16


# --------------------------------------------------------------------------- where a task finds its bytes

def location_of(target: Any) -> tuple[str, dict, int | None, str | None]:
    """(path or URL, storage options, size, ETag): what a task needs to reach the same bytes."""
    if isinstance(target, RemoteFile):
        return target.url, target.storage_options, target.size, target.etag
    if isinstance(target, (str, os.PathLike)):
        return os.path.abspath(os.fspath(target)), {}, None, None
    raise TypeError(f"dask collections need a path or a URL (tasks reopen it where they run), "
                    f"got {type(target).__name__}")


def reach(location: str, options: dict, size: int | None, etag: str | None) -> Any:
    """The path, or a RemoteFile for the URL (one that already knows the object's size and ETag when given)."""
    if not is_url(location):
        return location
    return RemoteFile(location, options, size=size, etag=etag)


class _OpenFiles:
    """Readers opened in this process, by location; a reopened object is checked against its ETag."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._readers: OrderedDict[tuple, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, location: str, options: dict, size: int | None, etag: str | None) -> tuple[Any, Group]:
        """(reader, tree) of the file, opened once per process."""
        key = (location, repr(sorted(options.items())), size, etag)
        with self._lock:
            found = self._readers.get(key)
            if found is not None:
                self._readers.move_to_end(key)
                return found
        target = reach(location, options, size, etag)
        reader = spec_of_file(target).open(target)
        found = (reader, tree_of(reader))
        with self._lock:
            self._readers[key] = found
            while len(self._readers) > self.capacity:
                _key, (old, _tree) = self._readers.popitem(last=False)
                old.close()
        return found

    def array(self, location: str, options: dict, size: int | None, etag: str | None, path: str) -> Array:
        """The array at ``path`` of the file's tree."""
        node = self.get(location, options, size, etag)[1].find(path)
        if not isinstance(node, Array):
            raise UnsupportedError(f"{location}: no array at {path!r} (the file changed?)")
        return node


_open_files = _OpenFiles(_OPEN_FILES)


def _row_range(block_id: tuple[int, ...] | None, step: int, rows: int) -> tuple[int, int]:
    low = (block_id or (0,))[0] * step
    return low, min(rows, low + step)


def _read_rows(location: str, options: dict, size: int | None, etag: str | None, base: int, row_items: int,
               dtype: str, trailing: tuple[int, ...], step: int, rows: int, block_id: Any = None) -> np.ndarray:
    """Rows of an uncompressed array of ``rows`` rows at byte ``base``: one ranged read (a map for local files)."""
    low, high = _row_range(block_id, step, rows)
    dtype_ = np.dtype(dtype)
    count = (high - low) * row_items
    offset = base + low * row_items * dtype_.itemsize
    if not is_url(location):
        return np.fromfile(location, dtype=dtype_, count=count, offset=offset).reshape((high - low, *trailing))
    remote = reach(location, options, size, etag)
    remote.readahead = 0
    data = remote.read(offset, count * dtype_.itemsize)
    return np.frombuffer(data, dtype=dtype_, count=count).reshape((high - low, *trailing))


# --------------------------------------------------------------------------- to_dask

def _array(read: Any, args: tuple, step: int, shape: tuple[int, ...], dtype: np.dtype, name: str) -> Any:
    """A dask array of row blocks of ``step`` rows, block i made by ``read(*args, step, rows, block_id=(i, ...))``.

    A blockwise layer, so the reads fuse with what follows them (``.sum()`` is one task per block).
    """
    require("dask.array", "arrayio.dask")
    import dask.array

    rows = shape[0]
    limits.check("graph_tasks", -(-rows // step), f"blocks of {step} rows of the dask array {name}")
    chunks = (tuple(min(step, rows - low) for low in range(0, rows, step)) or (0,), *((size,) for size in shape[1:]))
    return dask.array.map_blocks(read, *args, step, rows, chunks=chunks, dtype=dtype, name=name,
                                 meta=np.empty((0,) * len(shape), dtype=dtype))


def _rows_per_block(row_bytes: int, block_bytes: int) -> int:
    return max(1, block_bytes // max(1, row_bytes))


def _token(*parts: Any) -> str:
    return str(require("dask.base", "arrayio.dask").tokenize(*parts))


def _pick(root: Group, key: str | None) -> tuple[str, Array]:
    """The array named ``key`` (its path in the tree, or its ``key`` attribute), or the file's only array."""
    if key is not None:
        for path, array in root.arrays():
            if key in (path, array.attributes.get("key")):
                return path, array
        raise KeyError(key)
    arrays = list(root.arrays())
    if len(arrays) != 1:
        names = [str(array.attributes.get("key", path)) for path, array in arrays[:10]]
        raise UnsupportedError(f"to_dask: the file holds {len(arrays)} arrays; name one with key= (arrays: "
                               f"{', '.join(map(repr, names))}{' ...' if len(arrays) > 10 else ''}), or take them "
                               "all with to_dask_tree")
    return arrays[0]


def _raw_rows(array: Array) -> tuple[int, np.dtype] | None:
    """(byte offset, stored dtype) when the array is consecutive raw rows of the file; else None."""
    if [codec["name"] for codec in array.codecs] != ["bytes"] or array.reference is None or not array.shape:
        return None
    if tuple(array.chunks[1:]) != tuple(array.shape[1:]) or array.nchunks == 0:
        return None
    origin = (0,) * len(array.shape)
    first = array.reference(origin)
    if first is None:
        return None
    if array.grid[0] > 1:
        second = array.reference((1, *origin[1:]))
        if second is None or second.offset != first.offset + array.chunk_nbytes:
            return None
    endian = array.codecs[0].get("configuration", {}).get("endian", "little")
    return first.offset, array.dtype.newbyteorder(">" if endian == "big" else "<")


def _read_chunks(location: str, options: dict, size: int | None, etag: str | None, path: str, per_block: int,
                 block_id: Any = None) -> np.ndarray:
    """Model chunks of one block (``per_block`` of them along the first axis), read where the task runs: in one
    call (one fetch, decoded into one array) where the array reads runs of rows, else chunk by chunk."""
    array = _open_files.array(location, options, size, etag, path)
    block = tuple(block_id or ())
    if not array.shape:
        return np.asarray(array.read(()), dtype=array.dtype)
    first = block[0] * per_block
    if array.read_rows is not None and all(count == 1 for count in array.grid[1:]):
        low = first * array.chunks[0]
        return np.asarray(array.read_rows(low, min(array.shape[0], low + per_block * array.chunks[0])),
                          dtype=array.dtype)
    parts = [array.read((index, *block[1:])) for index in range(first, min(first + per_block, array.grid[0]))]
    joined = parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)
    return np.asarray(joined, dtype=array.dtype)


def _model_array(array: Array, path: str, location: tuple, name: str, block_bytes: int) -> Any:
    """Runs of model chunks along the first axis, as many as fit ``block_bytes`` (at least one; more when there
    would be over MAX_BLOCKS blocks): a task per chunk of 1 MiB would cost dask more than the read."""
    require("dask.array", "arrayio.dask")
    import dask.array

    per_block = max(1, -(-array.nchunks // MAX_BLOCKS), block_bytes // max(1, array.chunk_nbytes))
    meta = np.empty((0,) * len(array.shape), dtype=array.dtype)
    if not array.shape:
        return dask.array.map_blocks(_read_chunks, *location, path, 1, chunks=(), dtype=array.dtype, name=name,
                                     meta=meta)
    step = array.chunks[0] * per_block
    limits.check("graph_tasks", -(-array.shape[0] // step) * math.prod(array.grid[1:]),
                 f"blocks of the dask array of {path!r}")
    first = tuple(min(step, array.shape[0] - low) for low in range(0, array.shape[0], step)) or (0,)
    rest = tuple(tuple(min(chunk, size - low) for low in range(0, size, chunk)) or (0,)
                 for chunk, size in zip(array.chunks[1:], array.shape[1:]))
    return dask.array.map_blocks(_read_chunks, *location, path, per_block, chunks=(first, *rest), dtype=array.dtype,
                                 name=name, meta=meta)


def _dask_array(array: Array, path: str, location: tuple, block_bytes: int) -> Any:
    name = f"arrayio-{_token(location, path, array.shape, str(array.dtype), block_bytes)}"
    raw = _raw_rows(array)
    if raw is None:
        return _model_array(array, path, location, name, block_bytes)
    offset, dtype = raw
    trailing = tuple(array.shape[1:])
    row_items = math.prod(trailing)
    return _array(_read_rows, (*location, offset, row_items, dtype.str, trailing),
                  _rows_per_block(row_items * dtype.itemsize, block_bytes), array.shape, array.dtype, name)


def to_dask(target: Any, key: str | None = None, storage_options: dict | None = None,
            block_bytes: int = BLOCK_BYTES) -> Any:
    """A ``dask.array`` over one array of a file: its only one, or the one named ``key`` (tree path or key).

    An array that is raw rows of the file is read in row blocks of at most
    ``block_bytes``, one byte range each; any other in runs of its format's
    model chunks (Blosc chunks, frames) along the first axis, as many as fit
    ``block_bytes`` (at least one; more when the graph would pass
    ``MAX_BLOCKS``), each run one task: fetched in one request and decoded
    into one array where the model reads runs of rows.
    """
    resolved = resolve(target, storage_options)
    location = location_of(resolved)
    with spec_of_file(resolved).open(resolved) as reader:
        path, array = _pick(tree_of(reader), key)
        return _dask_array(array, path, location, block_bytes)


def to_dask_tree(target: Any, storage_options: dict | None = None, block_bytes: int = BLOCK_BYTES) -> dict[str, Any]:
    """{path: dask.array} for every array of the file's tree, each made as :func:`to_dask` makes one."""
    resolved = resolve(target, storage_options)
    location = location_of(resolved)
    with spec_of_file(resolved).open(resolved) as reader:
        return {path: _dask_array(array, path, location, block_bytes) for path, array in tree_of(reader).arrays()}


# --------------------------------------------------------------------------- validate_many

def _checked(target: Any, storage_options: dict | None) -> tuple[str | None, list[Problem]]:
    """(format name, problems) of one target; an unreadable target is a problem, not an exception."""
    try:
        resolved = resolve(target, storage_options or None)
        spec = spec_of_file(resolved)
        return spec.name, importlib.import_module(spec.module).validate(resolved)
    except FormatError as error:
        return None, [Problem.from_error(error)]
    except OSError as error:
        text = str(error) if str(target) in str(error) else f"{target}: {error.strerror or error}"
        return None, [Problem(text)]


def validate_checked(targets: list[Any], client: Any = None,
                     storage_options: dict | None = None) -> dict[Any, tuple[str | None, list[Problem]]]:
    """{target: (format name, problems)} computed on ``client`` (a local cluster when None)."""
    if client is None:
        distributed = require("distributed", "validating on a dask cluster")
        Client, LocalCluster = distributed.Client, distributed.LocalCluster

        with LocalCluster(processes=True, n_workers=min(4, os.cpu_count() or 1), threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster) as local:
            return validate_checked(targets, local, storage_options)
    futures = client.map(_checked, targets, storage_options=storage_options, pure=False)
    return dict(zip(targets, client.gather(futures)))


def validate_many(targets: Iterable[Any], client: Any = None,
                  storage_options: dict | None = None) -> dict[Any, list[Problem]]:
    """Validate many files (paths or URLs) in parallel on a dask.distributed client; {target: problems}.

    Without a client a LocalCluster of worker processes is started for the
    call and closed after it.
    """
    results = validate_checked(target_list(targets), client, checked_options(storage_options) or None)
    return {target: problems for target, (_name, problems) in results.items()}
