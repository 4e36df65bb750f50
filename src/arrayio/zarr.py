"""A read-only zarr-python 3 ``Store`` presenting any arrayio file as a Zarr v3 group, in place.

``open_store(target)`` opens the file with its format's reader and describes
what it holds as a tree of virtual groups and arrays; no byte of array data is
read until zarr asks for a chunk, and then only that chunk's bytes (its Blosc
chunks for bloscpack, its frame for kdb images). Each chunk is encoded with
the plain ``bytes`` codec (little endian, C order), so a chunk of an
uncompressed array is handed over as a zero-copy view of the mapped file.

What each format becomes (see docs/zarr.md):

- kastore / kast: one 1-D array per key, ``/`` in keys making nested groups,
  row blocks of at most 64 MiB; keys that cannot map one to one live in the
  root group ``%`` (see :func:`zarr_path_of_key` / :func:`key_of_zarr_path`).
- bloscpack: the array ``array`` with the file's dtype, shape and order.
- pycauset: the array ``matrix`` with the values pycauset gives.
- kdb: the episode table at the root and ``episodes/<episode_id>/...``.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import json
import math
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import numpy as np

try:
    from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, Store, SuffixByteRequest
    from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
except ModuleNotFoundError as error:  # say which extra installs it
    from ._optional import missing

    raise missing("zarr", "arrayio.zarr (zarr views, convert to zarr, refs)") from error

from . import _registry
from ._binary import release_pages
from ._keyed import Store as KeyedStore
from ._sources import is_url
from .errors import UnsupportedError

__all__ = [
    "MAX_CHUNK_BYTES",
    "UNMAPPED_GROUP",
    "FormatStore",
    "ReadOnlyError",
    "VirtualArray",
    "VirtualGroup",
    "key_of_zarr_path",
    "open_store",
    "tree_of",
    "unmappable_keys",
    "zarr_path_of_key",
]

MAX_CHUNK_BYTES = 64 << 20
UNMAPPED_GROUP = "%"
_RESERVED = frozenset({".", "..", "zarr.json"})  # node names Zarr forbids, or that would shadow a document
_SAFE = "!$&'()*+,;=:@~ -"  # kept as they are in path segments; "%" and "/" never are


class ReadOnlyError(UnsupportedError):
    """A write, delete or clear was asked of a read-only arrayio zarr store."""


# --------------------------------------------------------------------------- the virtual tree

@dataclass
class VirtualArray:
    """One array as zarr sees it, and how to read one chunk of it from the file.

    ``read(coords)`` returns the chunk's region of the array (short at the
    edges). ``byte_range(coords)`` gives (offset, length) in the file when the
    chunk is a plain little-endian C-order byte range there; ``blosc_chunk``
    maps a chunk to the whole Blosc chunk holding it exactly, when there is one.
    ``release(coords)`` lets the kernel drop the mapped file pages the chunk was
    read from (one pass through a large file keeps a small resident set).
    """

    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...]
    read: Callable[[tuple[int, ...]], np.ndarray]
    dimension_names: tuple[str, ...]
    attributes: dict = field(default_factory=dict)
    byte_range: Callable[[tuple[int, ...]], tuple[int, int]] | None = None
    blosc_chunk: Callable[[tuple[int, ...]], tuple[int, int] | None] | None = None
    strings: bool = False
    release: Callable[[tuple[int, ...]], None] | None = None

    @property
    def grid(self) -> tuple[int, ...]:
        """Number of chunks along each axis."""
        return tuple(-(-size // chunk) for size, chunk in zip(self.shape, self.chunks))

    def region(self, coords: tuple[int, ...]) -> tuple[slice, ...]:
        """The part of the array chunk ``coords`` covers (clipped at the edges)."""
        return tuple(slice(index * chunk, min((index + 1) * chunk, size))
                     for index, chunk, size in zip(coords, self.chunks, self.shape))

    def metadata(self) -> dict:
        """The array's ``zarr.json``."""
        if self.strings:
            data_type: Any = "string"
            codecs: list[dict] = [{"name": "vlen-utf8", "configuration": {}}]
            fill: Any = ""
        else:
            data_type = self.dtype.name
            codecs = [{"name": "bytes", "configuration": {"endian": "little"}}] if self.dtype.itemsize > 1 \
                else [{"name": "bytes", "configuration": {}}]
            fill = _fill_value(self.dtype)
        return {"zarr_format": 3, "node_type": "array", "shape": list(self.shape), "data_type": data_type,
                "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(self.chunks)}},
                "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
                "fill_value": fill, "codecs": codecs, "attributes": self.attributes,
                "dimension_names": list(self.dimension_names)}

    def encoded_chunk(self, coords: tuple[int, ...]) -> Any:
        """The stored bytes of chunk ``coords``: a buffer (zero-copy where the file allows)."""
        block = self.read(coords)
        if self.strings:
            return _vlen_utf8(block)
        if block.shape != self.chunks:  # the grid stores edge chunks at full size
            padded = np.zeros(self.chunks, dtype=block.dtype)
            padded[tuple(slice(0, size) for size in block.shape)] = block
            block = padded
        if block.dtype.byteorder == ">":
            block = block.astype(block.dtype.newbyteorder("<"))
        return np.ascontiguousarray(block).reshape(-1).view(np.uint8)


@dataclass
class VirtualGroup:
    """A group: attributes and named children (groups or arrays)."""

    attributes: dict = field(default_factory=dict)
    children: dict[str, VirtualGroup | VirtualArray] = field(default_factory=dict)

    def group(self, path: list[str]) -> VirtualGroup:
        """The subgroup at ``path``, created on the way."""
        node = self
        for name in path:
            child = node.children.setdefault(name, VirtualGroup())
            if not isinstance(child, VirtualGroup):
                raise TypeError(f"{name!r} is an array, not a group")
            node = child
        return node

    def walk(self, prefix: str = "") -> Iterator[tuple[str, VirtualGroup | VirtualArray]]:
        """(path, node) for this group and everything below it, parents first."""
        yield prefix, self
        for name, child in self.children.items():
            path = f"{prefix}/{name}" if prefix else name
            if isinstance(child, VirtualGroup):
                yield from child.walk(path)
            else:
                yield path, child


def _fill_value(dtype: np.dtype) -> Any:
    if dtype.kind == "b":
        return False
    if dtype.kind == "c":
        return [0.0, 0.0]
    if dtype.kind == "f":
        return 0.0
    return 0


def _vlen_utf8(values: np.ndarray) -> np.ndarray:
    """numcodecs' vlen-utf8 encoding: a u4 count, then a u4 length and the bytes of each string."""
    encoded = [str(value).encode("utf-8") for value in values.reshape(-1)]
    parts = [np.uint32(len(encoded)).tobytes()]
    for item in encoded:
        parts += [np.uint32(len(item)).tobytes(), item]
    return np.frombuffer(b"".join(parts), dtype=np.uint8)


_ZARR_DTYPES = frozenset(np.dtype(code) for code in (
    "bool", "i1", "u1", "<i2", "<u2", "<i4", "<u4", "<i8", "<u8", "<f2", "<f4", "<f8", "<c8", "<c16"))


def _check_dtype(dtype: np.dtype, what: str) -> np.dtype:
    little = dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype
    if little not in _ZARR_DTYPES:
        raise UnsupportedError(f"arrayio.zarr: {what} has dtype {dtype}, which Zarr v3 has no data type for")
    return little


def _rows_per_chunk(row_bytes: int, limit: int | None = None) -> int:
    return max(1, (MAX_CHUNK_BYTES if limit is None else limit) // max(1, row_bytes))


def jsonable(value: Any) -> Any:
    """A metadata value as JSON: bytes become {"base64": ...}, complex [real, imag], numpy scalars Python."""
    if isinstance(value, dict):
        return {str(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, complex):
        return [value.real, value.imag]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


# --------------------------------------------------------------------------- key <-> zarr path

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
    """The zarr path of a kastore/kast key.

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
    return "/".join(_segment(part) for part in key.split("/"))


def key_of_zarr_path(path: str) -> str:
    """The kastore/kast key behind a zarr array path (the inverse of :func:`zarr_path_of_key`)."""
    path = path.strip("/")
    if path.startswith(f"{UNMAPPED_GROUP}/"):
        return unquote(path[len(UNMAPPED_GROUP) + 1:])
    return "/".join(unquote(part) for part in path.split("/"))


# --------------------------------------------------------------------------- formats -> trees

def _keyed_tree(store: KeyedStore) -> VirtualGroup:
    root = VirtualGroup({"arrayio_format": store.layout_name})
    keys = list(store)
    bad = unmappable_keys(keys)
    source = store.source
    for key in keys:
        info = store.info(key)
        dtype = _check_dtype(np.dtype(info.dtype).newbyteorder("<"), f"key {key!r}")  # both layouts store little endian
        offset, _length = store.extent(key)
        count = info.shape[0]
        rows = min(_rows_per_chunk(dtype.itemsize), max(count, 1))
        path = zarr_path_of_key(key, key in bad).split("/")

        def byte_range(coords: tuple[int, ...], offset: int = offset, rows: int = rows, count: int = count,
                       itemsize: int = dtype.itemsize) -> tuple[int, int]:
            start = coords[0] * rows
            return offset + start * itemsize, (min(start + rows, count) - start) * itemsize

        def read(coords: tuple[int, ...], byte_range: Any = byte_range, dtype: np.dtype = dtype,
                 key: str = key) -> np.ndarray:
            start, length = byte_range(coords)
            return np.frombuffer(source.view(start, length, f"array {key!r}"), dtype=dtype)

        group = root.group(path[:-1])
        group.children[path[-1]] = VirtualArray((count,), dtype, (rows,), read, (f"dim_{count}",),
                                                {"key": key}, byte_range=byte_range,
                                                release=_releaser(source, byte_range))
    return root


def _releaser(source: Any, extent: Callable[[tuple[int, ...]], tuple[int, int]]) -> Callable[[tuple[int, ...]], None]:
    return lambda coords: release_pages(source, *extent(coords))


def _bloscpack_tree(reader: Any) -> VirtualGroup:
    dtype = _check_dtype(reader.dtype, "the bloscpack array")
    shape = tuple(reader.shape)
    starts = reader.starts
    chunk_bytes = int(reader.header.chunk_size) if reader.header.chunk_size > 0 else \
        int(np.max(np.diff(starts), initial=1))
    chunk_bytes = min(max(chunk_bytes, 1), MAX_CHUNK_BYTES)
    fortran = reader.order == "F" and len(shape) > 1
    axis = len(shape) - 1 if fortran else 0
    slab = math.prod(shape[:-1] if fortran else shape[1:]) * dtype.itemsize  # bytes per index of `axis`
    step = min(_rows_per_chunk(slab, chunk_bytes), max(shape[axis], 1)) if shape else 1
    chunks = tuple(step if index == axis else size for index, size in enumerate(shape))
    chunks = tuple(max(size, 1) for size in chunks)

    def span(coords: tuple[int, ...]) -> tuple[int, int]:
        low = coords[axis] * step if shape else 0
        high = min(low + step, shape[axis]) if shape else 1
        return low, high

    def read(coords: tuple[int, ...]) -> np.ndarray:
        low, high = span(coords)
        region = list(shape)
        if shape:
            region[axis] = high - low
        out = np.empty(math.prod(region) * dtype.itemsize, dtype=np.uint8)
        reader._read_bytes(low * slab, high * slab, out)
        return out.view(reader.dtype).reshape(region, order="F" if fortran else "C")

    def blosc_chunk(coords: tuple[int, ...]) -> tuple[int, int] | None:
        """(file offset, cbytes) of the one Blosc chunk that is exactly this zarr chunk, padded size."""
        if fortran or not shape or slab == 0:
            return None
        low, high = span(coords)
        index = int(np.searchsorted(starts, low * slab, side="right")) - 1
        if starts[index] != low * slab or starts[index + 1] != high * slab:
            return None
        position, header = reader.chunk_location(index)
        return position, int(header.cbytes)

    def extent(coords: tuple[int, ...]) -> tuple[int, int]:
        """The file bytes of the Blosc chunks chunk ``coords`` overlaps."""
        low, high = span(coords)
        if high <= low or slab == 0:
            return 0, 0
        first = int(np.searchsorted(starts, low * slab, side="right")) - 1
        last = int(np.searchsorted(starts, high * slab, side="left")) - 1
        positions = reader.positions
        end = int(positions[last + 1]) if last + 1 < len(positions) else reader.source.size
        return int(positions[first]), end - int(positions[first])

    metadata = reader.metadata if isinstance(reader.metadata, dict) else {"metadata": reader.metadata}
    attributes = {**jsonable(metadata), "order": reader.order}
    names = tuple(f"dim_{index}" for index in range(len(shape)))
    array = VirtualArray(shape, dtype, chunks, read, names, attributes, blosc_chunk=blosc_chunk,
                         release=_releaser(reader.source, extent))
    return VirtualGroup({"arrayio_format": "bloscpack"}, {"array": array})


def _pycauset_tree(container: Any) -> VirtualGroup:
    layout = container.layout
    shape = tuple(container.shape)
    if layout.opaque:
        raise UnsupportedError(f"arrayio.zarr: pycauset matrix_type {layout.matrix_type} keeps no matrix in the "
                               "payload; only its metadata can be read")
    conjugate = container.is_conjugated and layout.dtype.kind == "c"
    scalar = container.scalar
    probe = np.zeros(1, dtype=layout.dtype) * scalar if scalar != 1 else np.zeros(1, dtype=layout.dtype)
    dtype = _check_dtype(probe.dtype, "the pycauset matrix")
    names = ("row",) if len(shape) == 1 else ("row", "column")
    attributes = {"metadata": jsonable(container.metadata), "active_slot": container.active_slot,
                  "generation": container.generation}
    source = container.source

    def finish(block: np.ndarray) -> np.ndarray:
        if conjugate:
            block = np.conj(block)
        return block * scalar if scalar != 1 else block

    if layout.matrix_type in ("SYMMETRIC", "ANTISYMMETRIC"):
        # A row of these needs the column of every row above it: unpacked once, as pycauset does.
        row_bytes = (shape[1] if len(shape) > 1 else 1) * dtype.itemsize
        step = min(_rows_per_chunk(row_bytes), max(shape[0], 1))
        chunks = (step,) + tuple(max(size, 1) for size in shape[1:])
        values: list[np.ndarray] = []

        def read_unpacked(coords: tuple[int, ...]) -> np.ndarray:
            if not values:
                values.append(container.values())
            return values[0][coords[0] * step:(coords[0] + 1) * step]

        array = VirtualArray(shape, dtype, chunks, read_unpacked, names, attributes)
        return VirtualGroup({"arrayio_format": "pycauset"}, {"matrix": array})

    def payload(offset: int, length: int) -> np.ndarray:
        return np.frombuffer(source.view(container.payload_offset + offset, length, "matrix payload"), np.uint8)

    stored_row = (1 if layout.is_vector else layout.cols) * layout.dtype.itemsize  # unpacked bytes per stored row
    step = min(_rows_per_chunk(stored_row), max(layout.rows, 1))
    if not layout.zero_copy:  # packed rows are computed: a chunk of them must fit the row_block_bytes limit
        layout.check_row_block(step)
    transposed = layout.is_transposed and not layout.is_vector
    # Stored rows run along the last axis of a transposed matrix and of a vector read as a (1, n) row.
    axis = len(shape) - 1 if transposed or layout.is_vector else 0
    chunks = tuple(step if index == axis else max(size, 1) for index, size in enumerate(shape))

    def stored_span(coords: tuple[int, ...]) -> tuple[int, int]:
        low = coords[axis] * step
        return low, min(low + step, layout.rows)

    def byte_range(coords: tuple[int, ...]) -> tuple[int, int]:
        low, high = stored_span(coords)
        return container.payload_offset + low * stored_row, (high - low) * stored_row

    def read(coords: tuple[int, ...]) -> np.ndarray:
        low, high = stored_span(coords)
        if layout.zero_copy:
            block = payload(low * stored_row, (high - low) * stored_row).view(layout.dtype)
        else:
            block = _packed_rows(layout, payload, low, high)
        block = block.reshape(shape[:-1] + (-1,)) if layout.is_vector else block.reshape(-1, layout.cols)
        return finish(block.T if transposed else block)

    plain = layout.zero_copy and not transposed and not conjugate and scalar == 1
    array = VirtualArray(shape, dtype, chunks, read, names, attributes, byte_range=byte_range if plain else None,
                         release=_releaser(source, byte_range) if layout.zero_copy else None)
    return VirtualGroup({"arrayio_format": "pycauset"}, {"matrix": array})


def _packed_rows(layout: Any, payload: Callable[[int, int], np.ndarray], low: int, high: int) -> np.ndarray:
    """Stored rows ``low..high`` of a packed pycauset payload, unpacked (elements for vectors).

    Reads only those rows' bytes: bit rows of the dense stride, triangle rows from the
    row offsets, diagonal values, planar half-precision complex halves.
    """
    from .pycauset._matrices import DENSE, DIAGONAL, _row_offsets, dense_bit_stride

    rows, cols, count = layout.rows, layout.cols, high - low
    if layout.matrix_type == "IDENTITY":
        block = np.zeros((count, cols), dtype=layout.dtype)
        diagonal = np.arange(low, min(high, cols))
        block[diagonal - low, diagonal] = 1
        return block
    if layout.kind == DIAGONAL:
        block = np.zeros((count, rows), dtype=layout.dtype)
        block[np.arange(count), np.arange(low, high)] = payload(low * 8, count * 8).view("<f8")
        return block
    per_row = 1 if layout.is_vector else cols
    if layout.data_type == "COMPLEX_FLOAT16":  # all real halves, then all imaginary halves
        real = payload(low * per_row * 2, count * per_row * 2).view("<f2").astype(np.float32)
        imaginary = payload((rows * per_row + low * per_row) * 2, count * per_row * 2).view("<f2")
        return (real + 1j * imaginary.astype(np.float32)).astype(np.complex64)
    if layout.kind == DENSE:  # bits
        if layout.is_vector:
            first = low // 8
            bits = np.unpackbits(payload(first, -(-high // 8) - first), bitorder="little")
            return bits[low - first * 8:high - first * 8].astype(bool)
        stride = dense_bit_stride(cols)
        packed = payload(low * stride, count * stride).reshape(count, stride)[:, :-(-cols // 8)]
        return np.unpackbits(packed, axis=1, bitorder="little")[:, :cols].astype(bool)
    _, starts = _row_offsets(rows, layout.data_type, layout.diagonal)
    begin = int(starts[low])
    end = int(starts[high]) if high < rows else layout.nbytes()
    return layout.triangle_rows(payload(begin, end - begin), low, high)


def _kdb_tree(kdb: Any) -> VirtualGroup:
    from .kdb._codec import step_dtype

    metas = [kdb.read_meta(position) for position in range(len(kdb))]
    ids = [meta.episode_id for meta in metas]
    duplicated = {episode_id for episode_id, count in collections.Counter(ids).items() if count > 1}
    names = [f"{meta.episode_id}@{position}" if meta.episode_id in duplicated else str(meta.episode_id)
             for position, meta in enumerate(metas)]
    root = VirtualGroup({"arrayio_format": "kdb", "version": kdb.version, "episode_names": names})
    count = len(metas)

    def column(values: list, dtype: Any, strings: bool = False) -> VirtualArray:
        data = np.array(values, dtype=object if strings else dtype)
        return VirtualArray((count,), np.dtype(object) if strings else data.dtype, (max(count, 1),),
                            lambda coords: data, ("episode",), strings=strings)

    root.children.update({
        "episode_id": column(ids, np.int64),
        "num_frames": column([meta.num_frames for meta in metas], np.int64),
        "state_dim": column([meta.state_dim for meta in metas], np.int64),
        "action_dim": column([meta.action_dim for meta in metas], np.int64),
        "fps": column([meta.fps for meta in metas], np.float64),
        "success": column([-1 if meta.success is None else int(meta.success) for meta in metas], np.int8),
        "total_reward": column([np.nan if meta.total_reward is None else meta.total_reward for meta in metas],
                               np.float64),
        "task": column([meta.task for meta in metas], None, strings=True),
        "embodiment": column([meta.embodiment for meta in metas], None, strings=True),
    })
    episodes = root.group(["episodes"])
    for position, (meta, name) in enumerate(zip(metas, names)):
        episodes.children[name] = _episode_group(kdb, position, meta, step_dtype)
    return root


def _episode_group(kdb: Any, position: int, meta: Any, step_dtype: Callable) -> VirtualGroup:
    entry = kdb.entry(position)
    steps = step_dtype(entry.state_dim, entry.action_dim)
    frames = int(entry.num_frames)
    step = min(_rows_per_chunk(steps.itemsize), max(frames, 1))
    attributes = jsonable(meta.as_dict())
    group = VirtualGroup({**attributes, "position": position})

    def field_array(name: str, column: str, width: int | None) -> VirtualArray:
        dtype = np.dtype("u1") if column == "is_terminal" else np.dtype("<f4")
        shape = (frames,) if width is None else (frames, width)
        chunks = (step,) if width is None else (step, max(width, 1))

        def read(coords: tuple[int, ...]) -> np.ndarray:
            low = coords[0] * step
            high = min(low + step, frames)
            rows = kdb.source.array(entry.actions_offset + low * steps.itemsize, high - low, steps,
                                    f"episode {position} state/action section")
            return np.ascontiguousarray(rows[column])

        dims = ("frame",) if width is None else ("frame", f"{name}_dim")
        return VirtualArray(shape, dtype, chunks, read, dims)

    group.children["states"] = field_array("state", "state", int(entry.state_dim))
    group.children["actions"] = field_array("action", "action", int(entry.action_dim))
    group.children["rewards"] = field_array("reward", "reward", None)
    group.children["terminals"] = field_array("terminal", "is_terminal", None)
    images = group.group(["images"])
    episode_images = kdb.read_episode(position).images  # caches each frame's records once parsed
    # The cameras of the first frame: finding every camera would walk every frame's records, which
    # remotely reads the whole image section at open. A frame without one of them reads as zeros.
    for record in episode_images.records(0) if frames else []:
        if _segment(record.camera) not in images.children:
            images.children[_segment(record.camera)] = _camera_array(kdb, episode_images, record.camera, record)
    return group


def _camera_array(kdb: Any, images: Any, camera: str, record: Any) -> VirtualArray:
    image_shape = (int(record.height), int(record.width), int(record.channels))

    def read(coords: tuple[int, ...]) -> np.ndarray:
        frame = coords[0]
        try:
            found = images.record(frame, camera)
        except KeyError:
            return np.zeros((1, *image_shape), dtype=np.uint8)  # this frame has no image of the camera
        pixels = kdb.decode_image(found)
        if pixels.shape != image_shape:
            raise UnsupportedError(f"arrayio.zarr: kdb episode {images.position} camera {camera!r} changes "
                                   f"shape at frame {frame}: {pixels.shape}, not {image_shape}")
        return pixels[np.newaxis]

    chunk = (1, *(max(size, 1) for size in image_shape))  # a zarr chunk has no empty side (0 channels is valid)
    return VirtualArray((images.num_frames, *image_shape), np.dtype(np.uint8), chunk, read,
                        ("frame", "height", "width", "channel"), {"camera": camera})


def tree_of(reader: Any) -> VirtualGroup:
    """The virtual zarr hierarchy of an open arrayio reader."""
    from .bloscpack import BloscpackFile
    from .kdb import KdbFile
    from .pycauset import Container

    if isinstance(reader, KeyedStore):
        return _keyed_tree(reader)
    if isinstance(reader, BloscpackFile):
        return _bloscpack_tree(reader)
    if isinstance(reader, Container):
        return _pycauset_tree(reader)
    if isinstance(reader, KdbFile):
        return _kdb_tree(reader)
    raise UnsupportedError(f"arrayio.zarr: no zarr view of {type(reader).__name__} readers")


def open_reader(target: Any, storage_options: dict | None = None) -> Any:
    """The format reader of ``target`` (path, bytes, file object or URL) through ``arrayio.open``."""
    import arrayio

    if isinstance(target, (bytes, bytearray, memoryview)):
        name = _registry.detect(target)
        if name in ("kastore", "kast"):  # their load() takes bytes as a path, as the reference kastore does
            return _registry.module_for(name).loads(target)
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
        self._documents: dict[str, bytes] = {}
        self._arrays: dict[str, VirtualArray] = {}
        for path, node in self.root.walk():
            document = node.metadata() if isinstance(node, VirtualArray) else \
                {"zarr_format": 3, "node_type": "group", "attributes": node.attributes}
            self._documents[f"{path}/zarr.json" if path else "zarr.json"] = json.dumps(document).encode()
            if isinstance(node, VirtualArray):
                self._arrays[path] = node
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

    def array_at(self, key: str) -> tuple[VirtualArray, tuple[int, ...]] | None:
        """(array, chunk coordinates) named by a chunk key, or None."""
        parts = key.split("/")
        for ndim in range(min(len(parts) - 1, 32) + 1):
            if len(parts) < ndim + 1 or parts[len(parts) - ndim - 1] != "c":
                continue
            path = "/".join(parts[:len(parts) - ndim - 1])
            array = self._arrays.get(path)
            if array is None or len(array.shape) != ndim:
                continue
            try:
                coords = tuple(int(part) for part in parts[len(parts) - ndim:])
            except ValueError:
                return None
            if all(0 <= index < count for index, count in zip(coords, array.grid)):
                return array, coords
            return None
        return None

    def chunk_bytes(self, key: str) -> Any:
        """The stored bytes of a metadata document or chunk, or None when the key names nothing."""
        document = self._documents.get(key)
        if document is not None:
            return document
        found = self.array_at(key)
        if found is None:
            return None
        array, coords = found
        if self._lock is None:
            return array.encoded_chunk(coords)
        with self._lock:
            return array.encoded_chunk(coords)

    async def get(self, key: str, prototype: BufferPrototype | None = None,
                  byte_range: ByteRequest | None = None) -> Buffer | None:
        """The bytes stored under ``key`` (a document or a chunk), or None."""
        prototype = prototype or default_buffer_prototype()
        if key in self._documents:
            data: Any = self._documents[key]
        elif self._lock is None:
            # Mapped bytes: chunks are views or CPU-bound decodes, fastest one after another in the loop
            # (decoders in threads contend for the GIL and for Blosc's own threads).
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
        return key in self._documents or self.array_at(key) is not None

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
        for path, array in self._arrays.items():
            for coords in np.ndindex(*array.grid):
                yield "/".join([path, "c", *map(str, coords)])
        yield from self._documents

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
        prefix = prefix.rstrip("/")
        node: Any = self.root
        for name in prefix.split("/") if prefix else []:
            if not isinstance(node, VirtualGroup) or name not in node.children:
                return
            node = node.children[name]
        yield "zarr.json"
        if isinstance(node, VirtualGroup):
            for name in node.children:
                yield name
        elif any(node.grid) or not node.shape:
            yield "c"

    async def getsize(self, key: str) -> int:
        """Stored size of ``key`` in bytes."""
        data = self._documents.get(key)
        if data is not None:
            return len(data)
        found = self.array_at(key)
        if found is None:
            raise FileNotFoundError(key)
        array, _coords = found
        return math.prod(array.chunks) * array.dtype.itemsize


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

