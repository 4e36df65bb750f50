"""``arrayio convert``: between every pair of formats whose models meet, chunk by chunk.

A source is read as a tree of arrays (an arrayio file through its format's
tree, a Zarr v3 store, an ``.npz``, an ``.npy``); a target writes such a tree.
Arrays flow one chunk at a time (the source's own chunks: row blocks, Blosc
chunks, frames, npz member blocks), so memory stays bounded by the largest
chunk; writers that need a whole array get the source's own map when it is
raw bytes of the file, else a memory map of a spool file beside the target,
filled chunk by chunk. Output appears only when complete: a failure (a
corrupt source raises its FormatError) leaves nothing behind. zarr is
imported only when a Zarr store is one side.

What meets what is decided by models, never by format names:

| source model | targets |
| --- | --- |
| mapping (key -> 1-D array; also .npz) | mappings, trees |
| array (one array; also .npy) | arrays, trees |
| episodes | trees, and the format's own exports (``FormatSpec.exports``) |
| tree (a Zarr store) | everything (mappings take 1-D arrays, arrays take one) |

The arrayio formats come from the registry (``FormatSpec.model``, ``.save``,
``.exports``); the others are the :data:`SIDES` table, which a new outside
format extends with one :class:`Side`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
import warnings
import zipfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import limits
from ._edge import check_output, open_output, open_output_folder
from ._keyed_tree import key_of_zarr_path, unmappable_keys, zarr_path_of_key
from ._names import relative_name
from ._optional import require
from ._registry import FORMATS, FormatSpec, format_for_extension, spec_of_file
from ._sources import RemoteFile, is_url, resolve
from ._temporary import spool_array
from ._tree import Array, Group, tree_of
from .errors import ConversionWarning, FormatError, UnsupportedError

__all__ = ["SIDES", "ConversionWarning", "Side", "convert", "source_format", "target_format", "targets_of",
           "total_bytes"]

Progress = Callable[[int], None]
Blocks = Callable[[], Iterator[tuple[tuple[slice, ...], np.ndarray]]]
_BLOCK_BYTES = 64 << 20
# What the models are called here: a matrix is one array.
_FAMILY = {"mapping": "mapping", "array": "array", "matrix": "array", "episodes": "episodes", "tree": "tree"}
_MEETS = {"mapping": ("mapping", "tree"), "array": ("array", "tree"), "episodes": ("tree",),
          "tree": ("mapping", "array", "tree")}
# Toolkits that own conversions between their community's files (tree sequences and tszip, Blosc1 and
# python-blosc2): each declares CONVERSIONS, (source extension, target extension) -> (its function's name, the
# target's name, or None for the arrayio format that owns the target's extension). Each function takes
# (source, target, storage_options=None, progress=None).
_TOOLKITS = ("arrayio.tskit", "arrayio.blosc2")


# --------------------------------------------------------------------------- what a source holds

@dataclass
class _Array:
    """One source array, read in blocks of its own chunking."""

    path: str
    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    chunks: tuple[int, ...]
    blocks: Blocks
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
    target: Any = None


def _row_blocks(array: np.ndarray) -> Blocks:
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


def _stored_dtype(array: Array) -> np.dtype:
    endian = next((codec.get("configuration", {}).get("endian", "little") for codec in array.codecs
                   if codec["name"] == "bytes"), "little")
    return array.dtype.newbyteorder(">" if endian == "big" else "<")


def _whole_view(array: Array, source: Any) -> np.ndarray | None:
    """The whole array as one zero-copy view of the file, when its chunks are consecutive raw byte ranges."""
    if source is None or array.strings or [codec["name"] for codec in array.codecs] != ["bytes"] or not array.shape:
        return None
    if tuple(array.chunks[1:]) != tuple(array.shape[1:]) or array.nchunks == 0:
        return None
    first = array.chunk_reference((0,) * len(array.shape))
    if first is None:
        return None
    return source.array(first.offset, math.prod(array.shape), _stored_dtype(array), "array").reshape(array.shape)


def _tree_source(name: str, root: Group, source: Any, close: Callable[[], None]) -> _Source:
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
    return _Source(name, groups, arrays, close)


def _arrayio_source(target: Any, storage_options: dict | None) -> _Source:
    import arrayio

    reader = arrayio.open(target, storage_options)
    try:
        return _tree_source(reader.format, tree_of(reader), getattr(reader, "source", None), reader.close)
    except BaseException:
        reader.close()
        raise


def _zarr_source(target: Any, storage_options: dict | None) -> _Source:
    zarr = require("zarr", "convert from zarr")
    node = zarr.open(target, mode="r", storage_options=storage_options)
    if isinstance(node, zarr.Array):  # an array at the store's root (zarr.save("x.zarr", a))
        return _Source("zarr", {"": {}}, [_zarr_array("array", node)], lambda: None)
    groups = {"": dict(node.attrs)}
    arrays = []
    for path, member in node.members(max_depth=None):
        if isinstance(member, zarr.Group):
            groups[path] = dict(member.attrs)
        else:
            arrays.append(_zarr_array(path, member))
    return _Source("zarr", groups, arrays, lambda: None)


def _zarr_array(path: str, node: Any) -> _Array:
    def blocks() -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
        chunks = node.chunks
        for coords in np.ndindex(*(-(-n // c) for n, c in zip(node.shape, chunks))):
            region = tuple(slice(i * c, min((i + 1) * c, n)) for i, c, n in zip(coords, chunks, node.shape))
            yield region, node[region]

    attributes = dict(node.attrs)
    names = getattr(node.metadata, "dimension_names", None)
    return _Array(path, str(attributes.get("key", key_of_zarr_path(path))), tuple(node.shape), np.dtype(node.dtype),
                  tuple(node.chunks), blocks, attributes, tuple(names) if names else None,
                  str(attributes.get("order", "C")))


def _npz_source(target: Any, storage_options: dict | None) -> _Source:
    archive = zipfile.ZipFile(target)
    names = [name[:-4] for name in archive.namelist() if name.endswith(".npy")]
    unmappable = unmappable_keys(names)
    arrays = [_npz_member(archive, name, zarr_path_of_key(name, name in unmappable)) for name in names]
    return _Source("npz", {"": {}}, arrays, archive.close)


def _npz_member(archive: zipfile.ZipFile, name: str, path: str) -> _Array:
    """One npz member, streamed from the zip in blocks when they are asked for: a member is never inflated
    whole (a 3 MB archive may inflate to gigabytes), and one block is at most the npz_member_bytes limit."""
    with archive.open(name + ".npy") as member:
        shape, fortran, dtype = _npy_header(member, name)
    fortran = fortran and len(shape) > 1
    # Blocks run along the axis the member's bytes are laid out by: rows (C order) or the last axis (F).
    axis = len(shape) - 1 if fortran else 0
    slab = math.prod(size for index, size in enumerate(shape) if index != axis) * dtype.itemsize if shape else 0
    step = max(1, _BLOCK_BYTES // max(1, slab))

    def read(member: Any, low: int, count: int) -> bytes:
        what = f"member {name!r} rows {low}..{low + count}"
        limits.check("npz_member_bytes", count * slab, what, format="npz")
        try:
            data = member.read(count * slab)
        except (zipfile.BadZipFile, zlib.error, EOFError) as error:
            raise FormatError(format="npz", field=what, expected="intact deflated data", found=str(error)) from None
        if len(data) != count * slab:
            raise FormatError(format="npz", field=what, expected=f"{count * slab} bytes",
                              found=f"{len(data)} bytes (the member ends)")
        return data

    def blocks() -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
        with archive.open(name + ".npy") as member:
            _npy_header(member, name)
            if not shape:
                yield (), np.frombuffer(member.read(dtype.itemsize), dtype=dtype).reshape(())
                return
            for low in range(0, shape[axis], step):
                count = min(step, shape[axis] - low)
                region = tuple(slice(low, low + count) if index == axis else slice(0, size)
                               for index, size in enumerate(shape))
                block_shape = tuple(count if index == axis else size for index, size in enumerate(shape))
                yield region, np.frombuffer(read(member, low, count), dtype=dtype).reshape(
                    block_shape, order="F" if fortran else "C")

    chunks = tuple(max(1, min(size, step)) if index == axis else max(1, size) for index, size in enumerate(shape))
    return _Array(path, name, shape, dtype, chunks, blocks, {"key": name}, order="F" if fortran else "C")


def _npy_header(stream: Any, name: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(stream)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else \
            np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(stream)
    except (ValueError, zipfile.BadZipFile, zlib.error, EOFError) as error:
        raise FormatError(format="npz", field=f"member {name!r} header", expected="a .npy header",
                          found=str(error)) from None
    if np.dtype(dtype).hasobject:
        raise FormatError(format="npz", field=f"member {name!r} dtype", expected="a dtype without Python objects",
                          found=str(dtype))
    return tuple(shape), bool(fortran), np.dtype(dtype)


def _npy_source(target: Any, storage_options: dict | None) -> _Source:
    array = np.load(target, mmap_mode="r", allow_pickle=False)
    return _Source("npy", {"": {}}, [_plain_array("array", "array", array)], lambda: None)


def tool_conversion(source: Any, target: Any) -> tuple[Callable[..., Any], str] | None:
    """The toolkit function converting ``source`` to ``target`` and the target's name (None: the models' own)."""
    import importlib

    suffixes = tuple(os.path.splitext(os.fspath(path).split("?")[0].rstrip("/"))[1].lower()
                     for path in (source, target))
    for name in _TOOLKITS:
        toolkit = importlib.import_module(name)
        found = toolkit.CONVERSIONS.get(suffixes)
        if found is not None:
            function, target_name = found
            return getattr(toolkit, function), target_name or format_for_extension(target)
    return None


# --------------------------------------------------------------------------- staging the output

def _spooled(array: _Array, folder: Path, progress: Progress) -> np.ndarray:
    """The whole array as an ndarray: the source's own map when it has one, else a filled spool map."""
    if array.direct is not None:
        progress(array.nbytes)
        return array.direct
    spool = spool_array(folder, array.shape, array.dtype, "F" if array.order == "F" else "C")
    for region, block in array.blocks():
        spool[region] = block
        progress(block.nbytes)
    return spool


def _warn(message: str) -> None:
    warnings.warn(message, ConversionWarning, stacklevel=3)


# Attributes that describe an array rather than annotate it: no target needs to keep them.
_ARRAY_FACTS = frozenset({"container", "dtype", "shape", "order", "key"})


def _shown(attributes: dict, names: set[str]) -> str:
    text = json.dumps({name: attributes[name] for name in sorted(names)}, default=str)
    return text if len(text) <= 300 else text[:297] + "..."


# --------------------------------------------------------------------------- writers

def is_zarr_store(path: Path) -> bool:
    """True for a folder that is a Zarr store (a ``zarr.json``, or a v2 ``.zgroup``/``.zarray``, at its root):
    the only folders a conversion replaces."""
    for document in ("zarr.json", ".zgroup", ".zarray"):
        try:
            text = (path / document).read_text("utf-8")
            found = json.loads(text)
        except (OSError, ValueError):
            continue
        if isinstance(found, dict) and found.get("zarr_format") in (2, 3):
            return True
    return False


def _settle_zarr_writes() -> None:
    """Wait for the writes still running on zarr's event loop: an interrupt (Ctrl-C) stops our wait for
    them, not them, and they would go on writing into a staging folder that is being removed."""
    import asyncio

    from zarr.core.sync import _get_loop

    async def settle() -> None:
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        if others:
            await asyncio.wait(others, timeout=30)
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)

    with contextlib.suppress(Exception):
        asyncio.run_coroutine_threadsafe(settle(), _get_loop()).result(timeout=60)


def _write_zarr(source: _Source, path: Path, compression: str, progress: Progress) -> None:
    try:
        _write_zarr_arrays(source, path, compression, progress)
    except BaseException:
        _settle_zarr_writes()
        raise


def _write_zarr_arrays(source: _Source, path: Path, compression: str, progress: Progress) -> None:
    zarr = require("zarr", "convert to zarr")
    codecs = require("zarr.codecs", "convert to zarr")
    compressor = codecs.ZstdCodec(level=3) if compression == "zstd" else codecs.BloscCodec(cname="zstd", clevel=5,
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
            _warn(f"{target_name} keeps no array attributes: {array.path!r} loses {_shown(array.attributes, extra)}")
    if any(attributes for name, attributes in source.groups.items()
           if set(attributes) - {"arrayio_format"}):
        _warn(f"{target_name} keeps no group attributes")
    return source.arrays


def _write_npz(source: _Source, target_name: str, target: Any, spool: Path, progress: Progress) -> None:
    """An .npz written member by member, each from its source block by block (np.savez would copy each one)."""
    arrays = _mapping_arrays(source, target_name)
    for array in arrays:  # keys become zip member paths, which an unzip must not write outside its folder
        relative_name(array.key, "convert: the npz member name of key")
    with open_output(target) as stream, \
            zipfile.ZipFile(stream, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for array in arrays:
            with archive.open(array.key + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, _spooled(array, spool, progress), allow_pickle=False)


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


def _write_npy(source: _Source, target_name: str, target: Any, spool: Path, progress: Progress) -> None:
    array = _single_array(source, target_name)
    _warn_lost_attributes(array, target_name)
    fortran = array.order == "F" and len(array.shape) > 1
    with open_output(target) as stream:
        if not _in_file_order(array):
            np.lib.format.write_array(stream, _spooled(array, spool, progress), allow_pickle=False)
            return
        header = {"descr": np.lib.format.dtype_to_descr(array.dtype), "fortran_order": fortran, "shape": array.shape}
        np.lib.format.write_array_header_2_0(stream, header)
        for _region, block in array.blocks():
            stream.write(np.asarray(block, dtype=array.dtype).tobytes(order="F" if fortran else "C"))
            progress(block.nbytes)


def _warn_lost_attributes(array: _Array, target_name: str) -> None:
    extra = set(array.attributes) - _ARRAY_FACTS - {"active_slot", "generation"}
    if extra:
        _warn(f"{target_name} keeps no attributes: {_shown(array.attributes, extra)} of {array.path!r} are left out")


def _write_format(spec: FormatSpec, source: _Source, target: Any, spool: Path, progress: Progress) -> None:
    """A file of an arrayio format, written by its spec's ``save`` from the source's values."""
    assert spec.save is not None
    if _FAMILY[spec.model] == "mapping":
        arrays = _mapping_arrays(source, spec.name)
        spec.save({array.key: _spooled(array, spool, progress) for array in arrays}, target, {})
        return
    array = _single_array(source, spec.name)
    spec.save(_spooled(array, spool, progress), target, array.attributes)


# --------------------------------------------------------------------------- the table of sides

@dataclass(frozen=True)
class Side:
    """A format convert reads or writes that is not an arrayio format: how it is named, read and written.

    ``open(target, storage_options)`` reads it as a source; ``write(source,
    target_name, target, spool, progress)`` writes a new file from one (zarr
    folders get ``compression`` through their own writer below).
    """

    extensions: tuple[str, ...]
    model: str
    open: Callable[[Any, dict | None], _Source]
    write: Callable[[_Source, str, Any, Path, Progress], None] | None


SIDES: dict[str, Side] = {
    "zarr": Side((".zarr",), "tree", _zarr_source, None),
    "npz": Side((".npz",), "mapping", _npz_source, _write_npz),
    "npy": Side((".npy",), "array", _npy_source, _write_npy),
}


def _model(name: str) -> str:
    return _FAMILY[SIDES[name].model if name in SIDES else FORMATS[name].model]


def targets_of(source_name: str) -> tuple[str, ...]:
    """The formats a source of format ``source_name`` converts to."""
    meets = _MEETS[_model(source_name)]
    found = [name for name in (*FORMATS, *SIDES)
             if _model(name) in meets and (name in SIDES or FORMATS[name].save is not None)]
    if source_name in FORMATS:
        found += [name for name in FORMATS[source_name].exports if name not in found]
    return tuple(found)


def source_format(target: Any, storage_options: dict | None = None) -> str:
    """The format of a conversion source: a side by its extension (a folder is a Zarr store), else by magic bytes."""
    if isinstance(target, (str, os.PathLike)):
        text = os.fspath(target)
        suffix = os.path.splitext(text.rstrip("/"))[1].lower()
        for name, side in SIDES.items():
            if suffix in side.extensions:
                return name
        if os.path.isdir(text):
            return "zarr"
        if is_url(text):
            target = resolve(text, storage_options)
    return spec_of_file(target).name  # a clear error when no format's magic bytes match


def target_format(target: Any, to: str | None = None) -> str:
    """The format to write: ``to`` when given, else the target's extension."""
    if to is not None:
        name = to.lower()
        if name not in SIDES and name not in FORMATS:
            raise UnsupportedError(f"convert: unknown target format {to!r}; known: "
                                   f"{', '.join([*FORMATS, *SIDES])}")
        return name
    suffix = os.path.splitext(os.fspath(target).rstrip("/"))[1].lower()
    for name, side in SIDES.items():
        if suffix in side.extensions:
            return name
    return format_for_extension(target)


def _open_source(target: Any, name: str, storage_options: dict | None) -> _Source:
    if name in SIDES:
        return SIDES[name].open(target, storage_options)
    return _arrayio_source(target, storage_options)


# --------------------------------------------------------------------------- the entry point

def convert(source: Any, target: Any, *, to: str | None = None, compression: str = "zstd",
            storage_options: dict | None = None, progress: Progress | None = None, force: bool = True) -> str:
    """Convert ``source`` into a new ``target`` file or ``.zarr`` folder; returns the target format.

    ``to`` names the target format when the extension does not; ``compression``
    (``zstd`` or ``blosc``) applies to zarr targets; ``storage_options`` to the side(s)
    that are URLs. ``progress(nbytes)`` is
    called as array bytes are copied. Warnings (``ConversionWarning``) name
    what the target cannot hold. An existing target is replaced unless ``force=False``
    (the CLI's default); a folder only when it is a Zarr store, and never ``.``, the source
    or a folder holding it.
    """
    if compression not in ("zstd", "blosc"):
        raise UnsupportedError(f"convert: compression must be 'zstd' or 'blosc', not {compression!r}")
    tool = tool_conversion(source, target) if isinstance(source, (str, os.PathLike)) else None
    if tool is not None:
        check_output(target, force=force, sources=[source], storage_options=storage_options)
        tool[0](source, target, storage_options=storage_options, progress=progress)
        return tool[1]
    # storage_options serve whichever side is a URL (both, when both are)
    source_options = storage_options if is_url(source) else None
    source_name = source_format(source, source_options)
    target_name = target_format(target, to)
    allowed = targets_of(source_name)
    if target_name not in allowed:
        raise UnsupportedError(f"convert: {source_name} -> {target_name} is not a conversion the models allow; "
                               f"{source_name} converts to {', '.join(allowed) or 'nothing'}")
    report = progress or (lambda nbytes: None)
    check_output(target, force=force, sources=[source], folder=target_name == "zarr", replaces=is_zarr_store,
                 storage_options=storage_options)
    if is_url(target):
        if target_name == "zarr":
            raise UnsupportedError(f"convert: zarr targets are local folders, not {target}")
        spool = Path(tempfile.gettempdir())
        output: Any = RemoteFile(target, storage_options) if storage_options else target
    else:
        output = Path(os.fspath(target))
        output.parent.mkdir(parents=True, exist_ok=True)
        spool = output.parent
    export = FORMATS[source_name].exports.get(target_name) if source_name in FORMATS else None
    if export is not None:
        export(resolve(source, source_options) if is_url(source) else source, output, report)
        return target_name
    opened = _open_source(source, source_name, source_options)
    try:
        if target_name == "zarr":
            with open_output_folder(output, replaces=is_zarr_store, force=force, sources=[source]) as staging:
                _write_zarr(opened, staging, compression, report)
        elif target_name in SIDES:
            write = SIDES[target_name].write
            assert write is not None
            write(opened, target_name, output, spool, report)
        else:
            _write_format(FORMATS[target_name], opened, output, spool, report)
    finally:
        opened.close()
    return target_name


def total_bytes(source: Any, storage_options: dict | None = None) -> int:
    """Bytes of array data a conversion of ``source`` copies (for progress bars)."""
    storage_options = storage_options if is_url(source) else None
    name = source_format(source, storage_options)
    if _model(name) == "episodes":
        return 0
    opened = _open_source(source, name, storage_options)
    try:
        return sum(array.nbytes for array in opened.arrays)
    finally:
        opened.close()
