"""Byte-level helpers for the KAST tests, written from the layout in docs/formats/kast.md with ``struct``
(independent of arrayio's Record tables, so the tests do not check the reader against itself)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

GOLDEN = Path(__file__).with_name("golden")
HEADER_SIZE = 40
ENTRY_SIZE = 32
HEADER = struct.Struct("<4sHHIIQQII")
ENTRY = struct.Struct("<IQIQQ")
TYPE_CODES = {"int8": 0, "uint8": 1, "int16": 2, "uint16": 3, "int32": 4, "uint32": 5, "int64": 6, "uint64": 7,
              "float32": 8, "float64": 9}
DTYPE_NAMES = list(TYPE_CODES)

# Absolute offsets of the header fields and of the fields inside one entry.
HEADER_FIELDS = {"magic": 0, "version_major": 4, "version_minor": 6, "flags": 8, "num_keys": 12,
                 "keys_table_offset": 16, "data_offset": 24, "reserved": 32, "padding": 36}
ENTRY_FIELDS = {"key_length": (0, "<I"), "key_offset": (4, "<Q"), "data_type": (12, "<I"),
                "data_length": (16, "<Q"), "data_offset": (24, "<Q")}


def golden_bytes(name: str) -> bytes:
    """The bytes described by ``golden/<name>.hex`` (hex pairs; ``#`` starts a comment)."""
    text = (GOLDEN / f"{name}.hex").read_text()
    return bytes(int(pair, 16) for line in text.splitlines() for pair in line.split("#", 1)[0].split())


def build(items: list[tuple[bytes, np.ndarray]], *, version: tuple[int, int] = (1, 0), flags: int = 0) -> bytes:
    """A canonical KAST store of ``items`` in the order given (unsorted, duplicate or odd keys allowed)."""
    count = len(items)
    table_end = HEADER_SIZE + ENTRY_SIZE * count
    keys_end = table_end + sum(len(key) + 1 for key, _ in items)
    data_offset = -(-keys_end // 8) * 8
    table = b""
    area = b""
    data = b""
    position = data_offset
    for key, array in items:
        array = np.asarray(array)
        start = -(-position // 8) * 8
        table += ENTRY.pack(len(key), table_end + len(area), TYPE_CODES[array.dtype.name], array.size, start)
        area += key + b"\0"
        data += bytes(start - position) + array.astype(array.dtype.newbyteorder("<")).tobytes()
        position = start + array.nbytes
    header = HEADER.pack(b"KAST", version[0], version[1], flags, count, HEADER_SIZE, data_offset, 0, 0)
    return header + table + area + bytes(data_offset - keys_end) + data


def base_items() -> list[tuple[bytes, np.ndarray]]:
    """Three keys whose layout the corpus mutates: table 40..135, keys 136..152, data 160..188."""
    return [(b"alpha", np.arange(3, dtype=np.int16)), (b"beta", np.arange(2, dtype=np.float64)),
            (b"gamma", np.arange(5, dtype=np.uint8))]


def entry_offset(field: str, index: int) -> int:
    """Absolute offset of ``field`` of entry ``index``."""
    return HEADER_SIZE + ENTRY_SIZE * index + ENTRY_FIELDS[field][0]


def entry_field(raw: bytes, field: str, index: int) -> int:
    """The value of ``field`` of entry ``index``."""
    return struct.unpack_from(ENTRY_FIELDS[field][1], raw, entry_offset(field, index))[0]


def set_entry(raw: bytes, field: str, index: int, value: int) -> bytes:
    """``raw`` with ``field`` of entry ``index`` set to ``value``."""
    out = bytearray(raw)
    struct.pack_into(ENTRY_FIELDS[field][1], out, entry_offset(field, index), value)
    return bytes(out)


def set_header(raw: bytes, field: str, value: int, code: str = "<Q") -> bytes:
    """``raw`` with the header ``field`` set to ``value`` (``code`` is its struct type)."""
    out = bytearray(raw)
    struct.pack_into(code, out, HEADER_FIELDS[field], value)
    return bytes(out)


def set_byte(raw: bytes, offset: int, value: int) -> bytes:
    """``raw`` with one byte replaced."""
    out = bytearray(raw)
    out[offset] = value
    return bytes(out)
