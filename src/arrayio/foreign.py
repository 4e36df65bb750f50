"""The files ``arrayio convert`` writes that are not arrayio formats: NumPy ``.npy`` and ``.npz`` files and
Zarr stores (``.zarr`` folders). ``arrayio info``, ``ls`` and ``cat`` read them through this module, so
that a user can look at what convert wrote; they are not in the registry of arrayio's formats
(``arrayio.open`` and ``validate`` never take them), and no format package knows them.

The same small protocol as a format module: :func:`info`, :func:`entries`, :func:`cat`; :func:`kind_of`
says whether a local path is one of these files (by its magic bytes, or a folder's Zarr metadata).
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Iterator
from typing import Any

import numpy as np

from ._optional import require
from ._text import BLOCK_VALUES, TEXT_LIMIT, value_lines
from .errors import FormatError

__all__ = ["KINDS", "cat", "entries", "info", "kind_of"]

KINDS = ("npy", "npz", "zarr")
NPY_MAGIC = b"\x93NUMPY"
ZIP_MAGIC = b"PK\x03\x04"
_ZARR_METADATA = ("zarr.json", ".zgroup", ".zarray")


def kind_of(target: Any) -> str | None:
    """``"npy"``, ``"npz"`` or ``"zarr"`` for a local path holding such a file (or folder), else None."""
    if not isinstance(target, (str, os.PathLike)):
        return None
    path = os.fspath(target)
    if os.path.isdir(path):
        return "zarr" if any(os.path.exists(os.path.join(path, name)) for name in _ZARR_METADATA) else None
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(NPY_MAGIC))
    except OSError:
        return None
    if head.startswith(NPY_MAGIC):
        return "npy"
    if head.startswith(ZIP_MAGIC) and path.lower().endswith(".npz"):
        return "npz"
    return None


def _unreadable(path: Any, kind: str, error: Exception) -> FormatError:
    return FormatError(f"not a readable .{kind} {'store' if kind == 'zarr' else 'file'}: {error}", field=kind,
                       offset=None).naming(os.fsdecode(path))


def _row(name: str, dtype: Any, shape: tuple[int, ...]) -> dict[str, Any]:
    dtype = np.dtype(dtype)
    return {"name": name, "dtype": str(dtype), "shape": list(shape), "nbytes": math.prod(shape) * dtype.itemsize}


def _npy(path: Any) -> np.ndarray:
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError) as error:
        raise _unreadable(path, "npy", error) from None


def _npy_header(stream: Any) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype from the .npy header at the stream's position, which is left at the data."""
    version = np.lib.format.read_magic(stream)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _fortran, dtype = read_header(stream)
    if dtype.hasobject:
        raise ValueError("it holds Python objects (pickles), which are never loaded")
    return tuple(shape), dtype


def _npz_rows(path: Any) -> list[dict[str, Any]]:
    """One row per member, from the members' .npy headers (no array is read)."""
    rows = []
    try:
        with zipfile.ZipFile(path) as archive:
            for member in archive.namelist():
                with archive.open(member) as stream:
                    shape, dtype = _npy_header(stream)
                rows.append(_row(member.removesuffix(".npy"), dtype, shape))
    except (zipfile.BadZipFile, ValueError, EOFError) as error:
        raise _unreadable(path, "npz", error) from None
    return rows


def _npz_member_lines(path: Any, name: str, numbers: bool) -> Iterator[str]:
    """The values of one member, decompressed a block at a time in storage order (memory stays bounded)."""
    with zipfile.ZipFile(path) as archive, archive.open(name + ".npy") as stream:
        shape, dtype = _npy_header(stream)
        remaining = math.prod(shape) * dtype.itemsize
        if len(shape) == 1 and remaining <= TEXT_LIMIT:  # small enough to be text: whole
            yield from value_lines(np.frombuffer(stream.read(remaining), dtype), numbers)
            return
        while remaining > 0:
            data = stream.read(min(remaining, BLOCK_VALUES * dtype.itemsize))
            if len(data) % dtype.itemsize or not data:
                raise _unreadable(path, "npz", EOFError(f"member {name!r} ends {remaining} bytes early"))
            remaining -= len(data)
            yield from value_lines(np.frombuffer(data, dtype), numbers=True)


def _zarr_arrays(path: Any) -> Iterator[tuple[str, Any]]:
    zarr = require("zarr", "reading .zarr stores")
    try:
        root = zarr.open_group(os.fspath(path), mode="r")
        members = list(root.members(max_depth=None))
    except (ValueError, KeyError, OSError) as error:
        raise _unreadable(path, "zarr", error) from None
    for name, node in members:
        if isinstance(node, zarr.Array):
            yield name, node


def entries(target: Any) -> list[dict[str, Any]]:
    """One row per array: name (what ``cat`` takes), dtype, shape, nbytes."""
    kind = kind_of(target)
    if kind == "npy":
        array = _npy(target)
        return [_row("array", array.dtype, array.shape)]
    if kind == "npz":
        return _npz_rows(target)
    if kind == "zarr":
        return [{**_row(name, node.dtype, tuple(node.shape)), "chunks": list(node.chunks)}
                for name, node in _zarr_arrays(target)]
    raise FormatError("not an .npy, .npz or .zarr", field="magic", offset=0).naming(os.fsdecode(target))


def info(target: Any) -> dict[str, Any]:
    """Facts as an arrayio reader's ``info()`` gives them: format, file size, summary, one row per array."""
    kind = kind_of(target)
    rows = entries(target)
    path = os.fspath(target)
    size = (sum(os.path.getsize(os.path.join(folder, name)) for folder, _dirs, names in os.walk(path)
                for name in names) if kind == "zarr" else os.path.getsize(path))
    facts: dict[str, Any] = {"format": kind, "file_size": size,
                             "summary": f"{len(rows)} array{'s' if len(rows) != 1 else ''}, "
                                        f"{sum(row['nbytes'] for row in rows)} bytes of array data"
                                        " (not an arrayio format: written by numpy, zarr or arrayio convert)"}
    if kind == "npy":
        facts.update({key: rows[0][key] for key in ("dtype", "shape", "nbytes")})
    else:
        facts.update({"num_arrays": len(rows), "items": rows})
    return facts


def cat(target: Any, name: str, numbers: bool = False) -> Iterator[str]:
    """The values of array ``name``, one per line, a block of rows at a time (text bytes as text unless
    ``numbers``); KeyError when there is no such array."""
    kind = kind_of(target)
    if kind == "npy":
        if name != "array":
            raise KeyError(name)
        yield from value_lines(_npy(target), numbers)
    elif kind == "npz":
        if name not in {row["name"] for row in _npz_rows(target)}:
            raise KeyError(name)
        yield from _npz_member_lines(target, name, numbers)
    else:
        arrays = dict(_zarr_arrays(target))
        if name not in arrays:
            raise KeyError(name)
        node = arrays[name]
        if node.ndim <= 1 and node.nbytes <= TEXT_LIMIT:  # may be text: read whole
            yield from value_lines(np.asarray(node[...]), numbers)
            return
        step = max(1, node.chunks[0])
        for low in range(0, node.shape[0], step):
            yield from value_lines(np.asarray(node[low:low + step]), numbers=True)
