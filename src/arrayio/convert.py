"""``arrayio convert``: between every pair of formats whose models meet, chunk by chunk.

Sources and targets are the five arrayio formats, a Zarr v3 store (a ``.zarr``
folder), ``.npz`` and ``.npy``. Arrays flow one chunk at a time (the source's
own chunks: row blocks, Blosc chunks, frames), so memory stays bounded by the
largest chunk; writers that need a whole array (kastore, kast, bloscpack,
pycauset) get a memory map of a spool file beside the target, filled chunk
by chunk. Output appears only when complete: a failure (a corrupt source
raises its FormatError) leaves nothing behind.

| source | targets |
| --- | --- |
| kastore, kast, .npz | kastore, kast, .npz, zarr |
| bloscpack, pycauset, .npy | bloscpack, pycauset, .npy, zarr |
| kdb | .npz, zarr |
| zarr | kastore, kast, .npz (1-D arrays); bloscpack, pycauset, .npy (one array) |
"""

from __future__ import annotations

import math
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from . import _registry
from ._binary import atomic_folder, atomic_write
from ._keyed_tree import key_of_zarr_path, unmappable_keys, zarr_path_of_key
from ._sources import RemoteFile, is_url, resolve
from ._tree import Array, Group, tree_of
from .errors import UnsupportedError

__all__ = ["TARGETS", "ConversionWarning", "convert", "source_format", "target_format"]

Progress = Callable[[int], None]
_BLOCK_BYTES = 64 << 20
_MAPPING = ("kastore", "kast", "npz")
_SINGLE = ("bloscpack", "pycauset", "npy")
TARGETS: dict[str, tuple[str, ...]] = {
    "kastore": (*_MAPPING, "zarr"), "kast": (*_MAPPING, "zarr"), "npz": (*_MAPPING, "zarr"),
    "bloscpack": (*_SINGLE, "zarr"), "pycauset": (*_SINGLE, "zarr"), "npy": (*_SINGLE, "zarr"),
    "kdb": ("npz", "zarr"),
    "zarr": ("kastore", "kast", "npz", "bloscpack", "pycauset", "npy", "zarr"),
}
_EXTENSIONS = {".zarr": "zarr", ".npz": "npz", ".npy": "npy"}


class ConversionWarning(UserWarning):
    """The target cannot hold something the source has (attributes, a matrix type, ...)."""


# --------------------------------------------------------------------------- what the source holds

@dataclass
class _Array:
    """One source array, read in blocks of its own chunking."""

    path: str
    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...]
    blocks: Callable[[], Iterator[tuple[tuple[slice, ...], np.ndarray]]]
    attributes: dict = field(default_factory=dict)
    dimension_names: tuple[str, ...] | None = None
    order: str = "C"
    direct: np.ndarray | None = None

    @property
    def nbytes(self) -> int:
        """Bytes of the whole array."""
        return math.prod(self.shape) * self.dtype.itemsize


@dataclass
class _Source:
    format: str
    groups: dict[str, dict]
    arrays: list[_Array]
    close: Callable[[], None]


def _row_blocks(array: np.ndarray) -> Callable[[], Iterator[tuple[tuple[slice, ...], np.ndarray]]]:
    def blocks() -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
        if array.ndim == 0:
            yield (), array
            return
        row = max(1, math.prod(array.shape[1:]) * array.dtype.itemsize)
        step = max(1, _BLOCK_BYTES // row)
        for low in range(0, array.shape[0], step):
            region = (slice(low, min(low + step, array.shape[0])),) + tuple(slice(0, n) for n in array.shape[1:])
            yield region, array[region]
    return blocks


def _block_chunks(shape: tuple[int, ...], dtype: np.dtype) -> tuple[int, ...]:
    if not shape:
        return ()
    row = max(1, math.prod(shape[1:]) * dtype.itemsize)
    return (max(1, min(shape[0], _BLOCK_BYTES // row)),) + tuple(max(1, n) for n in shape[1:])


def _plain_array(path: str, key: str, array: np.ndarray, attributes: dict | None = None) -> _Array:
    order = "F" if array.ndim > 1 and np.isfortran(array) else "C"
    return _Array(path, key, array.shape, array.dtype, _block_chunks(array.shape, array.dtype), _row_blocks(array),
                  attributes or {}, order=order, direct=array)


def _whole_view(array: Array, source: Any) -> np.ndarray | None:
    """The whole array as one zero-copy view of the file, when its chunks are consecutive raw byte ranges."""
    if source is None or array.strings or [codec["name"] for codec in array.codecs] != ["bytes"] or not array.shape:
        return None
    if tuple(array.chunks[1:]) != tuple(array.shape[1:]) or array.nchunks == 0:
        return None
    first = array.chunk_reference((0,) * len(array.shape))
    if first is None or array.chunk_nbytes * array.nchunks < math.prod(array.shape) * array.dtype.itemsize:
        return None
    dtype = array.dtype.newbyteorder(">") if _v2_endian(array) == "big" else array.dtype
    count = math.prod(array.shape)
    return source.array(first.offset, count, dtype, "array").reshape(array.shape)


def _v2_endian(array: Array) -> str:
    return next((codec.get("configuration", {}).get("endian", "little") for codec in array.codecs
                 if codec["name"] == "bytes"), "little")


def _arrayio_source(target: Any, storage_options: dict | None) -> _Source:
    import arrayio

    reader = arrayio.open(target, storage_options)
    try:
        root = tree_of(reader)
    except BaseException:
        reader.close()
        raise
    source = getattr(reader, "source", None)
    groups: dict[str, dict] = {}
    arrays = []
    for path, node in root.walk():
        if isinstance(node, Group):
            groups[path] = node.attributes
            continue

        def blocks(node: Array = node) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
            for coords in np.ndindex(*node.grid):
                yield node.region(coords), node.read(coords)
                if node.release is not None:
                    node.release(coords)

        arrays.append(_Array(path, str(node.attributes.get("key", path)), node.shape, node.dtype, node.chunks, blocks,
                             dict(node.attributes), node.dimension_names, str(node.attributes.get("order", "C")),
                             _whole_view(node, source)))
    return _Source(reader.format, groups, arrays, reader.close)


def _zarr_source(target: Any, storage_options: dict | None) -> _Source:
    import zarr

    root = zarr.open_group(target, mode="r", storage_options=storage_options)
    groups = {"": dict(root.attrs)}
    arrays = []
    for path, node in root.members(max_depth=None):
        if isinstance(node, zarr.Group):
            groups[path] = dict(node.attrs)
            continue

        def blocks(node: Any = node) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
            chunks = node.chunks
            for coords in np.ndindex(*(-(-n // c) for n, c in zip(node.shape, chunks))):
                region = tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(coords, chunks, node.shape))
                yield region, node[region]

        attributes = dict(node.attrs)
        names = getattr(node.metadata, "dimension_names", None)
        arrays.append(_Array(path, str(attributes.get("key", key_of_zarr_path(path))), tuple(node.shape),
                             np.dtype(node.dtype), tuple(node.chunks), blocks, attributes,
                             tuple(names) if names else None, str(attributes.get("order", "C"))))
    return _Source("zarr", groups, arrays, lambda: None)


def _npz_source(target: Any) -> _Source:
    archive = np.load(target, allow_pickle=False)
    unmappable = unmappable_keys(archive.files)
    arrays = [_lazy_member(archive, name, zarr_path_of_key(name, name in unmappable)) for name in archive.files]
    return _Source("npz", {"": {}}, arrays, archive.close)


def _lazy_member(archive: Any, name: str, path: str) -> _Array:
    """One npz member, read when its blocks are asked for (members are not mappable)."""
    with archive.zip.open(name + ".npy") as member:
        version = np.lib.format.read_magic(member)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(member)
    def blocks() -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
        yield from _row_blocks(archive[name])()

    dtype = np.dtype(dtype)
    return _Array(path, name, tuple(shape), dtype, _block_chunks(tuple(shape), dtype), blocks, {"key": name},
                  order="F" if fortran and len(shape) > 1 else "C")


def _npy_source(target: Any) -> _Source:
    array = np.load(target, mmap_mode="r", allow_pickle=False)
    return _Source("npy", {"": {}}, [_plain_array("array", "array", array)], lambda: None)


def source_format(target: Any, storage_options: dict | None = None) -> str:
    """The format of a conversion source: zarr, npz, npy, or an arrayio format (from its magic bytes)."""
    if isinstance(target, (str, os.PathLike)):
        text = os.fspath(target)
        suffix = os.path.splitext(text.rstrip("/"))[1].lower()
        if suffix in _EXTENSIONS:
            return _EXTENSIONS[suffix]
        if os.path.isdir(text):
            return "zarr"
        if is_url(text):
            target = resolve(text, storage_options)
    name = _registry.detect(target)
    if name is None:
        _registry.module_of_file(target)  # raises the registry's "not a file of any known format"
    return str(name)


def target_format(target: Any, to: str | None = None) -> str:
    """The format to write: ``to`` when given, else the target's extension."""
    if to is not None:
        name = to.lower()
        if name not in TARGETS:
            raise UnsupportedError(f"convert: unknown target format {to!r}; known: {', '.join(TARGETS)}")
        return name
    suffix = os.path.splitext(os.fspath(target).rstrip("/"))[1].lower()
    if suffix in _EXTENSIONS:
        return _EXTENSIONS[suffix]
    return _registry.format_for_extension(target)


def _open_source(target: Any, fmt: str, storage_options: dict | None) -> _Source:
    if fmt == "zarr":
        return _zarr_source(target, storage_options)
    if fmt == "npz":
        return _npz_source(target)
    if fmt == "npy":
        return _npy_source(target)
    return _arrayio_source(target, storage_options)


# --------------------------------------------------------------------------- staging the output

def _spooled(array: _Array, folder: Path, progress: Progress) -> np.ndarray:
    """The whole array as an ndarray: the source's own map when it has one, else a filled spool map."""
    if array.direct is not None:
        progress(array.nbytes)
        return array.direct
    order: Literal["C", "F"] = "F" if array.order == "F" else "C"
    if array.nbytes == 0:
        return np.zeros(array.shape, dtype=array.dtype, order=order)
    handle, name = tempfile.mkstemp(prefix=".spool.", dir=folder)
    os.close(handle)
    spool = np.memmap(name, dtype=array.dtype, mode="w+", shape=array.shape, order=order)
    os.unlink(name)  # the map keeps the pages; nothing is left behind
    for region, block in array.blocks():
        spool[region] = block
        progress(block.nbytes)
    return spool


def _warn(message: str) -> None:
    warnings.warn(message, ConversionWarning, stacklevel=3)


_ARRAY_FACTS = frozenset({"container", "dtype", "shape", "order", "key"})


# --------------------------------------------------------------------------- writers

def _write_zarr(source: _Source, path: Path, compression: str, progress: Progress) -> None:
    import zarr
    from zarr.codecs import BloscCodec, ZstdCodec

    compressor = ZstdCodec(level=3) if compression == "zstd" else BloscCodec(cname="zstd", clevel=5,
                                                                             shuffle="shuffle")
    root = zarr.open_group(str(path), mode="w-", zarr_format=3, attributes=source.groups.get("", {}))
    for group_path, attributes in source.groups.items():
        if group_path:
            root.require_group(group_path).attrs.update(attributes)
    for array in source.arrays:
        strings = array.dtype.kind in "OUT"
        attributes = {**array.attributes, "order": array.order} if len(array.shape) > 1 else array.attributes
        created = root.create_array(array.path, shape=array.shape, dtype=str if strings else array.dtype,
                                    chunks=array.chunks or "auto", compressors=None if strings else compressor,
                                    attributes=attributes, dimension_names=array.dimension_names,
                                    fill_value="" if strings else None)
        for region, block in array.blocks():
            created[region] = block
            progress(block.nbytes)


def _mapping_arrays(source: _Source, target_name: str) -> list[_Array]:
    for array in source.arrays:
        if len(array.shape) != 1:
            raise UnsupportedError(f"convert: {target_name} holds 1-D arrays only; {array.path!r} has shape "
                                   f"{array.shape}")
        extra = set(array.attributes) - _ARRAY_FACTS
        if extra:
            _warn(f"{target_name} keeps no array attributes: {array.path!r} loses {sorted(extra)}")
    if any(attributes for name, attributes in source.groups.items()
           if set(attributes) - {"arrayio_format"}):
        _warn(f"{target_name} keeps no group attributes")
    return source.arrays


def _write_mapping(source: _Source, target_name: str, target: Any, spool: Path, progress: Progress) -> None:
    arrays = _mapping_arrays(source, target_name)
    data = {array.key: _spooled(array, spool, progress) for array in arrays}
    if target_name == "npz":
        with atomic_write(target) as stream:
            _write_npz(data, stream)
        return
    _registry.module_for(target_name).dump(data, target)


def _write_npz(data: dict[str, np.ndarray], stream: Any) -> None:
    """An .npz written member by member from the arrays' maps (np.savez would copy each one)."""
    import zipfile

    with zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, array in data.items():
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


def _single_array(source: _Source, target_name: str) -> _Array:
    numeric = [array for array in source.arrays if array.dtype.kind not in "OUT"]
    if len(numeric) != 1:
        raise UnsupportedError(f"convert: {target_name} holds one array; the {source.format} source has "
                               f"{len(numeric)}: {', '.join(array.path for array in numeric[:5])}")
    return numeric[0]


def _in_file_order(array: _Array) -> bool:
    """True when the array's blocks, taken in order, are consecutive runs of its .npy data."""
    if len(array.shape) < 2:
        return True
    if array.order == "F":
        return tuple(array.chunks[:-1]) == tuple(array.shape[:-1])
    return tuple(array.chunks[1:]) == tuple(array.shape[1:])


def _write_npy(array: _Array, stream: Any, spool: Path, progress: Progress) -> None:
    fortran = array.order == "F" and len(array.shape) > 1
    if not _in_file_order(array):
        np.lib.format.write_array(stream, _spooled(array, spool, progress), allow_pickle=False)
        return
    header = {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": fortran, "shape": array.shape}
    np.lib.format.write_array_header_2_0(stream, header)
    for _region, block in array.blocks():
        stream.write(np.asarray(block, dtype=array.dtype).tobytes(order="F" if fortran else "C"))
        progress(block.nbytes)


def _write_single(source: _Source, target_name: str, target: Any, spool: Path, progress: Progress) -> None:
    array = _single_array(source, target_name)
    metadata = array.attributes.get("metadata") if source.format in ("pycauset", "zarr") else None
    extra = set(array.attributes) - _ARRAY_FACTS - {"metadata", "active_slot", "generation"}
    if extra and target_name != "zarr":
        _warn(f"{target_name} keeps no attributes: {sorted(extra)} of {array.path!r} are left out")
    if isinstance(metadata, dict) and target_name != "pycauset" and (
            metadata.get("properties") or metadata.get("matrix_type") not in ("DENSE_FLOAT", "INTEGER", "VECTOR")):
        _warn(f"{target_name} keeps no pycauset metadata: matrix_type {metadata.get('matrix_type')}, "
              f"properties {sorted(metadata.get('properties', {}) or {})} are left out")
    if target_name == "npy":
        with atomic_write(target) as stream:
            _write_npy(array, stream, spool, progress)
        return
    values = _spooled(array, spool, progress)
    if target_name == "bloscpack":
        from . import bloscpack

        bloscpack.pack_ndarray_to_file(values, target)
        return
    from . import pycauset

    properties = None
    if isinstance(metadata, dict):
        if metadata.get("matrix_type") not in (None, "DENSE_FLOAT", "INTEGER", "VECTOR"):
            _warn(f"pycauset: the {metadata.get('matrix_type')} matrix is saved dense")
        properties = metadata.get("properties") if isinstance(metadata.get("properties"), dict) else None
    pycauset.save(values, target, properties=properties)


def _write_kdb_npz(source: Any, target: Any, progress: Progress) -> None:
    from .kdb.convert import export_npz

    export_npz(source, target, progress=lambda done, total: progress(0))


# --------------------------------------------------------------------------- the entry point

def convert(source: Any, target: Any, *, to: str | None = None, compression: str = "zstd",
            storage_options: dict | None = None, progress: Progress | None = None) -> str:
    """Convert ``source`` into a new ``target`` file or ``.zarr`` folder; returns the target format.

    ``to`` names the target format when the extension does not; ``compression``
    (``zstd`` or ``blosc``) applies to zarr targets; ``storage_options`` to the side(s)
    that are URLs. ``progress(nbytes)`` is
    called as array bytes are copied. Warnings (``ConversionWarning``) name
    what the target cannot hold.
    """
    if compression not in ("zstd", "blosc"):
        raise UnsupportedError(f"convert: compression must be 'zstd' or 'blosc', not {compression!r}")
    # storage_options serve whichever side is a URL (both, when both are)
    source_options = storage_options if is_url(source) else None
    source_name = source_format(source, source_options)
    target_name = target_format(target, to)
    if target_name not in TARGETS.get(source_name, ()):
        allowed = ", ".join(TARGETS.get(source_name, ())) or "nothing"
        raise UnsupportedError(f"convert: {source_name} -> {target_name} is not a conversion the models allow; "
                               f"{source_name} converts to {allowed}")
    report = progress or (lambda nbytes: None)
    if is_url(target):
        if target_name == "zarr":
            raise UnsupportedError(f"convert: zarr targets are local folders, not {target}")
        spool = Path(tempfile.gettempdir())
        output: Any = RemoteFile(target, storage_options) if storage_options else target
    else:
        output = Path(os.fspath(target))
        output.parent.mkdir(parents=True, exist_ok=True)
        spool = output.parent
    if source_name == "kdb" and target_name == "npz":
        _write_kdb_npz(resolve(source, source_options) if is_url(source) else source, output, report)
        return target_name
    opened = _open_source(source, source_name, source_options)
    try:
        if target_name == "zarr":
            with atomic_folder(output, replace=True) as staging:
                _write_zarr(opened, staging, compression, report)
        elif target_name in _MAPPING:
            _write_mapping(opened, target_name, output, spool, report)
        else:
            _write_single(opened, target_name, output, spool, report)
    finally:
        opened.close()
    return target_name


def total_bytes(source: Any, storage_options: dict | None = None) -> int:
    """Bytes of array data a conversion of ``source`` copies (for progress bars)."""
    storage_options = storage_options if is_url(source) else None
    fmt = source_format(source, storage_options)
    if fmt == "kdb":
        return 0
    opened = _open_source(source, fmt, storage_options)
    try:
        return sum(array.nbytes for array in opened.arrays)
    finally:
        opened.close()
