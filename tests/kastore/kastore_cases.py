"""Shared helpers for the kastore tests: sample data, byte-level field access, load modes."""

from __future__ import annotations

import io
import os
import struct
from pathlib import Path
from typing import Any, Callable

import numpy as np

import arrayio.kastore as kastore

DTYPE_NAMES = ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]
TYPE_CODES = {name: code for code, name in enumerate(DTYPE_NAMES)}
MAGIC = b"\x89KAS\r\n\x1a\n"
HEADER_SIZE = 64
ITEM_SIZE = 64

# Header field offsets and struct codes (notes §1.1).
VERSION_MAJOR = 8
VERSION_MINOR = 10
NUM_ITEMS = 12
FILE_SIZE = 16
# Descriptor field offsets within one 64-byte descriptor (notes §1.2).
D_TYPE = 0
D_KEY_START = 8
D_KEY_LEN = 16
D_ARRAY_START = 24
D_ARRAY_LEN = 32


def all_types(n: int) -> dict[str, np.ndarray]:
    """The upstream standard-file content: one key per dtype name, arange(n)."""
    return {name: np.arange(n, dtype=name) for name in DTYPE_NAMES}


def header(buffer: bytes) -> tuple:
    """(magic, major, minor, num_items, file_size) of a store."""
    return struct.unpack_from("<8sHHIQ", buffer, 0)


def descriptor(buffer: bytes, index: int) -> tuple:
    """(type, key_start, key_len, array_start, array_len) of descriptor ``index``."""
    return struct.unpack_from("<B7xQQQQ", buffer, HEADER_SIZE + ITEM_SIZE * index)


def field_offset(index: int, field: int) -> int:
    """Absolute offset of a descriptor field."""
    return HEADER_SIZE + ITEM_SIZE * index + field


def with_u64(buffer: bytes, offset: int, value: int) -> bytes:
    out = bytearray(buffer)
    struct.pack_into("<Q", out, offset, value)
    return bytes(out)


def with_u32(buffer: bytes, offset: int, value: int) -> bytes:
    out = bytearray(buffer)
    struct.pack_into("<I", out, offset, value)
    return bytes(out)


def with_u16(buffer: bytes, offset: int, value: int) -> bytes:
    out = bytearray(buffer)
    struct.pack_into("<H", out, offset, value)
    return bytes(out)


def with_u8(buffer: bytes, offset: int, value: int) -> bytes:
    out = bytearray(buffer)
    out[offset] = value
    return bytes(out)


def read_everything(store: Any) -> dict[str, np.ndarray]:
    """Copy every array out of a store (forces lazy reads)."""
    return {key: np.array(store[key]) for key in store}


def _by_path(path: Path, read_all: bool) -> dict:
    with kastore.load(path, read_all=read_all) as store:
        return read_everything(store)


def _by_fd(path: Path, read_all: bool) -> dict:
    fd = os.open(path, os.O_RDONLY)
    try:
        with kastore.load(fd, read_all=read_all) as store:
            return read_everything(store)
    finally:
        os.close(fd)


def _by_fileobj(path: Path, read_all: bool) -> dict:
    with open(path, "rb") as handle:
        with kastore.load(handle, read_all=read_all) as store:
            return read_everything(store)


def _by_bytesio(path: Path, read_all: bool) -> dict:
    with kastore.load(io.BytesIO(path.read_bytes()), read_all=read_all) as store:
        return read_everything(store)


def _by_loads(path: Path, read_all: bool) -> dict:
    with kastore.loads(path.read_bytes()) as store:
        return read_everything(store)


LOADERS: dict[str, Callable[[Path, bool], dict]] = {
    "path": _by_path, "fd": _by_fd, "fileobj": _by_fileobj, "bytesio": _by_bytesio, "loads": _by_loads,
}
# (loader name, read_all) pairs: every way of loading a file.
LOAD_MODES = [(name, read_all) for name in LOADERS for read_all in (False, True)]
LOAD_MODE_IDS = [f"{name}-{'read_all' if read_all else 'lazy'}" for name, read_all in LOAD_MODES]


def load_file(mode: tuple[str, bool], path: Path) -> dict:
    """Load ``path`` in ``mode`` and read every array."""
    name, read_all = mode
    return LOADERS[name](path, read_all)


def load_bytes(data: bytes, read_all: bool) -> dict:
    """Load a store from bytes through a BytesIO stream (not ``loads``) and read every array."""
    with kastore.load(io.BytesIO(data), read_all=read_all) as store:
        return read_everything(store)


def assert_same(actual: dict, expected: dict) -> None:
    """Same keys (in sorted order) and arrays with equal dtype and values (NaN-aware)."""
    assert sorted(actual) == sorted(expected)
    for key, value in expected.items():
        value = np.asarray(value)
        got = actual[key]
        assert got.dtype == value.dtype.newbyteorder("<") or got.dtype == value.dtype, key
        assert got.shape == value.shape, key
        np.testing.assert_array_equal(got, value, err_msg=key)


ITEMSIZES = [np.dtype(name).itemsize for name in DTYPE_NAMES]


def craft(items: list[tuple[int, bytes, bytes]], *, major: int = 1, minor: int = 0, padding: int = 0,
          header_reserved: bytes = bytes(40), item_reserved: bytes = bytes(24), type_reserved: bytes = bytes(7),
          num_items: int | None = None) -> bytes:
    """A store laid out canonically from raw parts, for inputs our writer refuses to make.

    ``items`` are (type code, key bytes, array bytes) in file order; ``padding``
    is the byte used between arrays.
    """
    count = len(items)
    position = HEADER_SIZE + ITEM_SIZE * count
    key_starts = []
    for _, key, _ in items:
        key_starts.append(position)
        position += len(key)
    body = bytearray()
    array_starts = []
    for _, _, data in items:
        start = -(-position // 8) * 8
        body += bytes([padding]) * (start - position)
        array_starts.append(start)
        body += data
        position = start + len(data)
    out = bytearray(struct.pack("<8sHHIQ", MAGIC, major, minor, count if num_items is None else num_items,
                                position))
    out += header_reserved
    for (code, key, data), key_start, array_start in zip(items, key_starts, array_starts):
        itemsize = ITEMSIZES[code] if code < 10 else 1
        out += struct.pack("<B", code) + type_reserved
        out += struct.pack("<QQQQ", key_start, len(key), array_start, len(data) // itemsize)
        out += item_reserved
    out += b"".join(key for _, key, _ in items)
    out += body
    return bytes(out)


def canonical_problem(raw: bytes) -> str | None:
    """An independent model of the reader's acceptance rules (notes §1.5 plus unique, decodable,
    non-empty keys); None when ``raw`` holds a loadable store."""
    if len(raw) < HEADER_SIZE:
        return "short header"
    magic, major, _, count, file_size = header(raw)
    if magic != MAGIC:
        return "magic"
    if major != 1:
        return "version"
    if file_size < HEADER_SIZE or file_size > len(raw):
        return "file_size"
    position = HEADER_SIZE + ITEM_SIZE * count
    if position > file_size:
        return "descriptors"
    items = [descriptor(raw, index) for index in range(count)]
    keys = set()
    for code, key_start, key_len, _, _ in items:
        if code > 9:
            return "type"
        if key_start != position or key_len == 0:
            return "key_start/key_len"
        position += key_len
        if position > file_size:
            return "key range"
        try:
            key = raw[key_start:key_start + key_len].decode("utf-8")
        except UnicodeDecodeError:
            return "key utf-8"
        if key in keys:
            return "duplicate key"
        keys.add(key)
    for code, _, _, array_start, array_len in items:
        if array_start != -(-position // 8) * 8:
            return "array_start"
        position = array_start + array_len * ITEMSIZES[code]
        if position > file_size:
            return "array range"
    if position != file_size:
        return "file_size"
    return None
