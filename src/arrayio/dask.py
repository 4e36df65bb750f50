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

from . import limits
from ._optional import require
from ._registry import module_of_file
from ._sources import RemoteFile, is_url, resolve
from .errors import FormatError, Problem, UnsupportedError

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
    remote = _reach(location, options, size, etag)
    remote.readahead = 0
    data = remote.read(offset, count * dtype_.itemsize)
    return np.frombuffer(data, dtype=dtype_, count=count).reshape((high - low, *trailing))


def _bloscpack_rows(location: str, options: dict, size: int | None, etag: str | None, step: int, rows: int,
                    block_id: Any = None) -> np.ndarray:
    """Rows of a bloscpack array: the chunks holding them, fetched in one request and verified."""
    low, high = _row_range(block_id, step, rows)
    return _open_files.get(location, options, size, etag)[low:high]


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
    name = f"arrayio-bloscpack-{_token(location, shape, str(dtype))}"
    if reader.order != "C" or not shape:
        return _whole_array(location, shape, dtype, name)
    row_bytes = math.prod(shape[1:]) * dtype.itemsize
    chunk_bytes = int(reader.header.chunk_size) if reader.header.chunk_size > 0 else int(reader.starts[1])
    return _array(_bloscpack_rows, location, _rows_per_block(row_bytes, chunk_bytes), shape, dtype, name)


def _whole_array(location: tuple, shape: tuple[int, ...], dtype: np.dtype, name: str) -> Any:
    """Fortran-order and 0-d arrays: one block, read whole."""
    require("dask.array", "arrayio.dask")
    import dask
    import dask.array

    return dask.array.from_delayed(dask.delayed(_whole, pure=True, name=name)(*location), shape, dtype=dtype)


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
    dtype = np.dtype(info.dtype).newbyteorder("<")  # stored little-endian; info.dtype is the name
    name = f"arrayio-{store.layout_name}-{_token(location, key)}"
    return _array(_read_rows, (*location, offset, 1, dtype.str, ()), _rows_per_block(dtype.itemsize, block_bytes),
                  info.shape, dtype, name)


def _matrix_array(container: Any, location: tuple, block_bytes: int) -> Any:
    layout = container.layout
    if not layout.zero_copy:
        raise UnsupportedError(f"to_dask: pycauset {layout.matrix_type}/{layout.data_type} payloads are packed, "
                               "not plain rows; load them with arrayio.pycauset.load")
    dtype = layout.dtype
    trailing = () if layout.is_vector else (layout.cols,)
    row_items = math.prod(trailing)
    name = f"arrayio-pycauset-{_token(location, container.payload_offset)}"
    array = _array(_read_rows, (*location, container.payload_offset, row_items, dtype.str, trailing),
                   _rows_per_block(row_items * dtype.itemsize, block_bytes), (layout.rows, *trailing), dtype, name)
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
            images = {camera: np.asarray(frames) for camera, frames in episode.images.items()}
            episodes.append(Episode(episode.meta, episode.steps.copy(), images))  # type: ignore[arg-type]
    return episodes


def kdb_bag(targets: Iterable[Any], storage_options: dict | None = None,
            episodes_per_partition: int | None = None) -> Any:
    """A ``dask.bag`` of the episodes of many ``.kdb`` files (paths or URLs).

    One partition per file, or per ``episodes_per_partition`` episodes (then
    each file's header is read here to count them). Elements are ``kdb.Episode``
    values whose ``images`` map camera -> (frames, H, W, C) uint8 arrays.
    """
    require("dask.bag", "arrayio.dask")
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

def _checked(target: Any, storage_options: dict | None) -> tuple[str | None, list[Problem]]:
    """(format name, problems) of one target; an unreadable target is a problem, not an exception."""
    try:
        resolved = resolve(target, storage_options or None)
        module = module_of_file(resolved)
        return module.FORMAT_NAME, module.validate(resolved)
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
    results = validate_checked(list(targets), client, storage_options)
    return {target: problems for target, (_name, problems) in results.items()}
