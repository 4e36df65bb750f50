"""dask collections built from the formats' byte-range indexes (optional extra ``dask``).

    to_dask(target, key=None, storage_options=None)   a dask.array whose chunks follow the file
    kdb_bag(targets, storage_options=None)            a dask.bag of kdb episodes over many files
    validate_many(targets, client=None)               {target: [problem, ...]} validated on a cluster

Task graphs hold only the location (path or URL), storage options, byte
offsets, counts and dtypes: never data. Each task reads its own range where
it runs; a worker keeps a few opened files so the header and index of a
file are read once per worker, not once per task.
"""

from __future__ import annotations

import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import Any

import numpy as np

from ._registry import module_of_file
from ._sources import RemoteFile, is_url, resolve
from .errors import UnsupportedError

__all__ = ["BLOCK_BYTES", "kdb_bag", "to_dask", "validate_many"]

# An uncompressed array is split into row blocks of at most this many bytes (one byte range each).
BLOCK_BYTES = 64 << 20
# Opened files a worker process keeps (least recently used closed first).
_OPEN_FILES = 16


# --------------------------------------------------------------------------- where a task finds its bytes

def _location(target: Any) -> tuple[str, dict, int | None, str | None]:
    """(path or URL, storage options, size, ETag): what a task needs to reach the same bytes."""
    if isinstance(target, RemoteFile):
        return target.url, target.storage_options, target.size, target.etag
    if isinstance(target, (str, os.PathLike)):
        return os.path.abspath(os.fspath(target)), {}, None, None
    raise TypeError(f"dask collections need a path or a URL (tasks reopen it where they run), "
                    f"got {type(target).__name__}")


def _reach(location: str, options: dict, size: int | None, etag: str | None) -> Any:
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

    def get(self, location: str, options: dict, size: int | None, etag: str | None) -> Any:
        key = (location, repr(sorted(options.items())), size, etag)
        with self._lock:
            reader = self._readers.get(key)
            if reader is not None:
                self._readers.move_to_end(key)
                return reader
        target = _reach(location, options, size, etag)
        reader = module_of_file(target).open(target)
        with self._lock:
            self._readers[key] = reader
            while len(self._readers) > self.capacity:
                _key, old = self._readers.popitem(last=False)
                old.close()
        return reader


_open_files = _OpenFiles(_OPEN_FILES)


def _read_range(location: str, options: dict, size: int | None, etag: str | None, offset: int, count: int,
                dtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """``count`` elements of ``dtype`` at byte ``offset``, shaped: one ranged read (a map for local files)."""
    dtype_ = np.dtype(dtype)
    if not is_url(location):
        return np.fromfile(location, dtype=dtype_, count=count, offset=offset).reshape(shape)
    remote = _reach(location, options, size, etag)
    remote.readahead = 0
    data = remote.read(offset, count * dtype_.itemsize)
    return np.frombuffer(data, dtype=dtype_, count=count).reshape(shape)


def _bloscpack_rows(location: str, options: dict, size: int | None, etag: str | None, low: int,
                    high: int) -> np.ndarray:
    """Rows ``low..high`` of a bloscpack array: the chunks holding them, fetched in one request and verified."""
    reader = _open_files.get(location, options, size, etag)
    return reader[low:high]


# --------------------------------------------------------------------------- to_dask

def _array(name: str, tasks: list[tuple], chunks: tuple[tuple[int, ...], ...], dtype: np.dtype) -> Any:
    from dask.array import Array
    from dask.highlevelgraph import HighLevelGraph

    trailing = (0,) * (len(chunks) - 1)
    graph = {(name, index, *trailing): task for index, task in enumerate(tasks)}
    return Array(HighLevelGraph.from_collections(name, graph, dependencies=()), name, chunks, dtype=dtype)


def _row_blocks(rows: int, row_bytes: int, block_bytes: int) -> list[tuple[int, int]]:
    step = max(1, block_bytes // max(1, row_bytes))
    return [(low, min(rows, low + step)) for low in range(0, rows, step)] or [(0, 0)]


def _token(*parts: Any) -> str:
    from dask.base import tokenize

    return tokenize(*parts)


def to_dask(target: Any, key: str | None = None, storage_options: dict | None = None,
            block_bytes: int = BLOCK_BYTES) -> Any:
    """A ``dask.array`` over a bloscpack file, a kastore/kast key or a dense pycauset payload.

    bloscpack: one dask chunk per bloscpack chunk (row-aligned chunks; otherwise
    row blocks of about a chunk). kastore/kast keys and dense pycauset payloads
    are uncompressed: row blocks of at most ``block_bytes``, one byte range each.
    """
    resolved = resolve(target, storage_options)
    location = _location(resolved)
    module = module_of_file(resolved)
    name = module.FORMAT_NAME
    with module.open(resolved) as reader:
        if name == "bloscpack":
            return _bloscpack_array(reader, location)
        if name in ("kastore", "kast"):
            return _keyed_array(reader, key, location, block_bytes)
        if name == "pycauset":
            return _matrix_array(reader, location, block_bytes)
    raise UnsupportedError(f"to_dask: {name} files hold episodes, not one array; use kdb_bag")


def _bloscpack_array(reader: Any, location: tuple) -> Any:
    shape, dtype = reader.shape, reader.dtype
    if reader.order != "C" or not shape:
        rows, blocks = (shape[0] if shape else 1), [(0, shape[0] if shape else 1)]
    else:
        rows = shape[0]
        row_bytes = math.prod(shape[1:]) * dtype.itemsize
        chunk_bytes = int(reader.header.chunk_size) if reader.header.chunk_size > 0 else int(reader.starts[1])
        blocks = _row_blocks(rows, row_bytes, chunk_bytes)
    name = f"arrayio-bloscpack-{_token(location, shape, str(dtype))}"
    tasks = [(_bloscpack_rows, *location, low, high) for low, high in blocks]
    chunks = (tuple(high - low for low, high in blocks), *((size,) for size in shape[1:]))
    if not shape:
        return _array(name, [(_whole, *location)], (), dtype)
    return _array(name, tasks, chunks, dtype)


def _whole(location: str, options: dict, size: int | None, etag: str | None) -> np.ndarray:
    return _open_files.get(location, options, size, etag).read()


def _keyed_array(store: Any, key: str | None, location: tuple, block_bytes: int) -> Any:
    keys = list(store)
    if key is None:
        if len(keys) != 1:
            raise ValueError(f"to_dask: the store holds {len(keys)} keys; name one with key= (keys: "
                             f"{', '.join(map(repr, keys[:10]))}{' ...' if len(keys) > 10 else ''})")
        key = keys[0]
    if key not in store:
        raise KeyError(key)
    info = store.info(key)
    offset, _length = store.extent(key)
    dtype = info.dtype.newbyteorder("<") if info.dtype.itemsize > 1 else info.dtype
    blocks = _row_blocks(info.shape[0], dtype.itemsize, block_bytes)
    name = f"arrayio-{store.layout_name}-{_token(location, key)}"
    tasks = [(_read_range, *location, offset + low * dtype.itemsize, high - low, dtype.str, (high - low,))
             for low, high in blocks]
    return _array(name, tasks, (tuple(high - low for low, high in blocks),), dtype)


def _matrix_array(container: Any, location: tuple, block_bytes: int) -> Any:
    layout = container.layout
    if not layout.zero_copy:
        raise UnsupportedError(f"to_dask: pycauset {layout.matrix_type}/{layout.data_type} payloads are packed, "
                               "not plain rows; load them with arrayio.pycauset.load")
    dtype = layout.dtype
    cols = 1 if layout.is_vector else layout.cols
    row_bytes = cols * dtype.itemsize
    blocks = _row_blocks(layout.rows, row_bytes, block_bytes)
    name = f"arrayio-pycauset-{_token(location, container.payload_offset)}"
    base = container.payload_offset
    if layout.is_vector:
        tasks = [(_read_range, *location, base + low * row_bytes, high - low, dtype.str, (high - low,))
                 for low, high in blocks]
        chunks: tuple = (tuple(high - low for low, high in blocks),)
    else:
        tasks = [(_read_range, *location, base + low * row_bytes, (high - low) * cols, dtype.str,
                  (high - low, cols)) for low, high in blocks]
        chunks = (tuple(high - low for low, high in blocks), (cols,))
    array = _array(name, tasks, chunks, dtype)
    return layout.orient(array)


# --------------------------------------------------------------------------- kdb_bag

def _episodes(location: str, options: dict, size: int | None, etag: str | None, start: int,
              stop: int | None) -> list:
    """Episodes ``start..stop`` of one kdb file, their images decoded (a partition of kdb_bag)."""
    from .kdb import Episode

    target = _reach(location, options, size, etag)
    episodes = []
    with module_of_file(target).open(target) as kdb:
        for position in range(start, len(kdb) if stop is None else stop):
            episode = kdb.read_episode(position)
            images = {camera: episode.images[camera] for camera in episode.images.cameras}
            episodes.append(Episode(episode.meta, episode.steps.copy(), images))  # type: ignore[arg-type]
    return episodes


def kdb_bag(targets: Iterable[Any], storage_options: dict | None = None,
            episodes_per_partition: int | None = None) -> Any:
    """A ``dask.bag`` of the episodes of many ``.kdb`` files (paths or URLs).

    One partition per file, or per ``episodes_per_partition`` episodes (then
    each file's index is read here to count them). Elements are ``kdb.Episode``
    values whose ``images`` map camera -> (frames, H, W, C) uint8 arrays.
    """
    import dask
    import dask.bag

    parts = []
    for target in targets:
        if episodes_per_partition is None:  # nothing to read here: the worker opens the file
            where = target.url if isinstance(target, RemoteFile) else (
                target if is_url(target) else os.path.abspath(os.fspath(target)))
            parts.append(dask.delayed(_episodes, pure=True)(where, dict(storage_options or {}), None, None, 0, None))
            continue
        resolved = resolve(target, storage_options)
        location = _location(resolved)
        with module_of_file(resolved).open(resolved) as kdb:
            count = len(kdb)
        for start in range(0, count, episodes_per_partition):
            parts.append(dask.delayed(_episodes, pure=True)(*location, start,
                                                            min(count, start + episodes_per_partition)))
    return dask.bag.from_delayed(parts)


# --------------------------------------------------------------------------- validate_many

def _validate_one(target: Any, storage_options: dict | None) -> list[str]:
    """arrayio.validate, with an unreadable target reported as a problem instead of raised."""
    from . import validate

    try:
        return validate(target, storage_options=storage_options or None)
    except OSError as error:
        return [f"{target}: {error.strerror or error}" if not str(error).count(str(target))
                else str(error)]


def validate_many(targets: Iterable[Any], client: Any = None,
                  storage_options: dict | None = None) -> dict[Any, list[str]]:
    """Validate many files (paths or URLs) in parallel on a dask.distributed client; {target: problems}.

    Without a client a LocalCluster of worker processes is started for the
    call and closed after it.
    """
    targets = list(targets)
    if client is None:
        from distributed import Client, LocalCluster

        with LocalCluster(processes=True, n_workers=min(4, os.cpu_count() or 1), threads_per_worker=1,
                          dashboard_address=None) as cluster, Client(cluster) as local:
            return validate_many(targets, local, storage_options)
    futures = client.map(_validate_one, targets, storage_options=storage_options, pure=False)
    return dict(zip(targets, client.gather(futures)))
