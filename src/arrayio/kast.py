"""The KAST draft layout (``.kast``, magic ``KAST``, version 1.0): string keys -> 1-D numpy arrays.

The same data model as kastore (the shared ``_keyed`` model: ten dtypes, the
``Store`` mapping, zero-copy loading from paths, concatenated stores in
streams) in the byte layout of the withdrawn first draft of the kastore
documentation: a 40-byte header, a keys table of 32-byte entries, a keys area
of NUL-terminated keys and 8-byte aligned arrays. Every byte and every point
the draft left open is in docs/formats/kast.md.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import numpy as np

from . import errors as _errors
from ._binary import U64_MAX, Record, Source, Writer, output_stream, read_exactly, round_up
from ._sources import is_remote, is_url, resolve
from ._keyed import (
    DTYPES,
    ITEMSIZES,
    KeyedFormat,
    KeyedIndex,
    Prepared,
    Store,
    ValueInfo,
    aligned,
    decode_keys,
    entry_rows,
    first_failure,
    lines_of,
    load_buffer,
    load_store,
    padding_problems,
    prepare,
    read_fixed,
    running_starts,
    write_sample,
)
from .errors import ArrayIOError, ErrorKinds, UnsupportedError

__all__ = [
    "load", "loads", "dump", "dumps", "Store", "ValueInfo", "NoStoreError", "StoreClosedError",
    "FORMAT_NAME", "open", "info", "validate", "entries", "cat", "demo",
]

FORMAT_NAME = "kast"
MAGIC = b"KAST"
VERSION_MAJOR = 1
VERSION_MINOR = 0
ALIGNMENT = 8
DEFAULT_KEY_ENCODING = "utf-8"
U32_MAX = 0xFFFFFFFF

HEADER = Record("header", [
    ("magic", "4s"), ("version_major", "<u2"), ("version_minor", "<u2"), ("flags", "<u4"),
    ("num_keys", "<u4"), ("keys_table_offset", "<u8"), ("data_offset", "<u8"),
    ("reserved", "4s"), ("padding", "4s"),
], size=40)

# One keys-table entry. Packed: key_offset sits at byte 4, so tables are read as unaligned structured views.
ENTRY = Record("keys table entry", [
    ("key_length", "<u4"), ("key_offset", "<u8"), ("data_type", "<u4"),
    ("data_length", "<u8"), ("data_offset", "<u8"),
], size=32)

KEYS_TABLE_OFFSET = HEADER.size


class NoStoreError(_errors.TruncatedError, EOFError):
    """The data ends where a store should begin (0 bytes): the clean end of a stream of stores.

    It is a FormatError for callers who treat empty input as malformed and an
    EOFError for loops that read concatenated stores until the end.
    """


class StoreClosedError(ArrayIOError):
    """The store was closed; its arrays can no longer be looked up."""


ERRORS = ErrorKinds(FORMAT_NAME)


# --------------------------------------------------------------------------- reader

def _no_store() -> NoStoreError:
    return NoStoreError("kast: header at byte 0: expected a 40-byte header, the data is empty (no store)",
                        format=FORMAT_NAME, field="header", offset=0, expected="40 bytes", found="0 bytes")


def _check_header(header: Any) -> None:
    """The header fields that can be checked before the keys table is read."""
    ERRORS.check_magic("header.magic", 0, MAGIC, header.magic)
    ERRORS.check_version("header.version_major", HEADER.offsets["version_major"], VERSION_MAJOR,
                         header.version_major)
    if header.flags != 0:
        raise ERRORS.invalid("header.flags", HEADER.offsets["flags"], "0 (version 1 defines no flag bits)",
                             f"{header.flags:#010x}")
    if header.keys_table_offset != KEYS_TABLE_OFFSET:
        raise ERRORS.invalid("header.keys_table_offset", HEADER.offsets["keys_table_offset"],
                             f"{KEYS_TABLE_OFFSET} (the keys table follows the header)", header.keys_table_offset)


def _entry_offset(field: str, index: int) -> int:
    return ENTRY.offset_of(field, KEYS_TABLE_OFFSET, index)


def _check_keys(entries: np.ndarray, table_end: int, size: int) -> None:
    """Types, key lengths and key ranges: keys packed in table order after the table, inside the data."""
    types = entries["data_type"]
    key_length = entries["key_length"].astype(np.uint64)
    key_offset = entries["key_offset"]
    limit = np.uint64(size)
    # Item i's key must start where item i-1's NUL ends; comparing with the previous
    # item's own (already range-checked) fields keeps every sum below 2**64.
    previous_end = np.concatenate((np.array([table_end], dtype=np.uint64), key_offset[:-1] + key_length[:-1] + 1))
    failure = first_failure([
        (types >= len(DTYPES), lambda i: ERRORS.invalid(
            f"item {i} data_type", _entry_offset("data_type", i), "a type code 0..9", int(types[i]))),
        (key_length == 0, lambda i: ERRORS.invalid(
            f"item {i} key_length", _entry_offset("key_length", i), "a non-empty key (key_length >= 1)", 0)),
        (key_offset > np.uint64(U64_MAX) - (key_length + 1), lambda i: ERRORS.invalid(
            f"item {i} key range", _entry_offset("key_offset", i), "key_offset + key_length + 1 below 2**64",
            f"key_offset {int(key_offset[i])}, key_length {int(key_length[i])}")),
        (key_offset != previous_end, lambda i: ERRORS.invalid(
            f"item {i} key_offset", _entry_offset("key_offset", i),
            f"{int(previous_end[i])} (keys packed in table order after the keys table, each followed by one NUL)",
            int(key_offset[i]))),
        (key_offset + key_length + 1 > limit, lambda i: ERRORS.truncated(
            format=FORMAT_NAME, field=f"item {i} key range", offset=_entry_offset("key_offset", i),
            expected=f"the key and its NUL inside the data's {size} bytes",
            found=f"key_offset {int(key_offset[i])}, key_length {int(key_length[i])}")),
    ])
    if failure is not None:
        raise failure


def _check_terminators(area: np.ndarray, terminators: np.ndarray, table_end: int) -> None:
    """Each key is followed by a NUL and contains none itself (so C-string readers agree on it)."""
    missing = area[terminators] != 0
    if missing.any():
        index = int(np.flatnonzero(missing)[0])
        raise ERRORS.invalid(f"item {index} key terminator", table_end + int(terminators[index]),
                             "a NUL byte after the key's key_length bytes", bytes(area[terminators[index]:][:1]))
    zeros = np.flatnonzero(area == 0)
    if zeros.size != terminators.size:
        # Every terminator is a zero, so the first position where the lists differ is a NUL inside a key.
        first = int(np.flatnonzero(zeros[:terminators.size] != terminators)[0])
        position = int(zeros[first])
        raise ERRORS.invalid(f"item {first} key", table_end + position,
                             "a key without NUL bytes (NUL only as the terminator)", b"\x00")


def _check_arrays(entries: np.ndarray, data_offset: int, size: int) -> np.ndarray:
    """Array ranges below 2**64, 8-aligned, in table order without overlaps or gaps, inside the data; returns
    their ends. The table's own consistency ranks before the data's presence, so a stream (which checks the
    table before reading on) and a file report the same entry."""
    types = entries["data_type"]
    length = entries["data_length"]
    start = entries["data_offset"]
    limit = np.uint64(size)
    itemsizes = ITEMSIZES[types]
    overflow = length > (np.uint64(U64_MAX) - start) // itemsizes
    end = np.where(overflow, limit, start + np.where(overflow, np.uint64(0), length * itemsizes))
    previous_end = np.concatenate((np.array([data_offset], dtype=np.uint64), end[:-1]))
    packed_start = aligned(previous_end, ALIGNMENT)

    def after_what(i: int) -> str:
        return "header.data_offset" if i == 0 else f"the end of item {i - 1}'s array"

    failure = first_failure([
        (overflow, lambda i: ERRORS.invalid(
            f"item {i} data range", _entry_offset("data_offset", i),
            "data_offset + data_length x itemsize below 2**64",
            f"data_offset {int(start[i])}, data_length {int(length[i])} x {int(itemsizes[i])} bytes")),
        (start % np.uint64(ALIGNMENT) != 0, lambda i: ERRORS.invalid(
            f"item {i} data_offset", _entry_offset("data_offset", i), "a multiple of 8 (aligned array)",
            int(start[i]))),
        (start < previous_end, lambda i: ERRORS.invalid(
            f"item {i} data_offset", _entry_offset("data_offset", i),
            f">= {int(previous_end[i])} ({after_what(i)}; arrays must not overlap)", int(start[i]))),
        (start != packed_start, lambda i: ERRORS.invalid(
            f"item {i} data_offset", _entry_offset("data_offset", i),
            f"{int(packed_start[i])} ({after_what(i)} rounded up to 8: arrays packed in table order)",
            int(start[i]))),
        (end > limit, lambda i: ERRORS.truncated(
            format=FORMAT_NAME, field=f"item {i} data range", offset=_entry_offset("data_offset", i),
            expected=f"the array inside the data's {size} bytes",
            found=f"data_offset {int(start[i])}, data_length {int(length[i])} x {int(itemsizes[i])} bytes")),
    ])
    if failure is not None:
        raise failure
    return end


def _check_table(header: Any, entries: np.ndarray, size: int) -> tuple[int, int]:
    """Everything the header and keys table fix, against ``size`` bytes of data; returns (keys_end, store_end).

    Needs no bytes beyond the table, so a stream reader runs it (with an
    unbounded size) before reading the rest of the store.
    """
    count = entries.size
    table_end = KEYS_TABLE_OFFSET + ENTRY.size * count
    _check_keys(entries, table_end, size)
    keys_end = table_end + int(entries["key_length"].sum(dtype=np.uint64)) + count
    data_offset = round_up(keys_end, ALIGNMENT)
    if header.data_offset != data_offset:
        raise ERRORS.invalid("header.data_offset", HEADER.offsets["data_offset"],
                             f"{data_offset} (the keys area's end {keys_end} rounded up to 8)", header.data_offset)
    if data_offset > size:
        raise ERRORS.truncated_at("padding after the keys area (up to header.data_offset)", keys_end,
                                  data_offset - keys_end, size)
    ends = _check_arrays(entries, data_offset, size)
    return keys_end, int(ends[-1]) if count else data_offset


def _parse_index(source: Source, key_encoding: str) -> KeyedIndex:
    """Read and check the header, keys table and keys area of the store at the start of ``source``.

    Every per-entry check is vectorised over the table, so opening costs
    O(number of keys); nothing is allocated beyond what the data holds.
    """
    if source.size == 0:
        raise _no_store()
    header = HEADER.read(source, 0)
    _check_header(header)
    count = header.num_keys
    entries = ENTRY.read_array(source, KEYS_TABLE_OFFSET, count, what=f"keys table ({count} entries)")
    keys_end, store_end = _check_table(header, entries, source.size)
    table_end = KEYS_TABLE_OFFSET + ENTRY.size * count
    key_length = entries["key_length"].astype(np.uint64)
    area = np.frombuffer(source.view(table_end, keys_end - table_end, "keys area"), dtype=np.uint8)
    terminators = (entries["key_offset"] + key_length - np.uint64(table_end)).astype(np.intp)
    _check_terminators(area, terminators, table_end)
    keys = decode_keys(area.tobytes(), key_length.tolist(), table_end, key_encoding, ERRORS, separator=1)
    return KeyedIndex(header, keys, entries["data_type"].tolist(), entries["data_offset"].tolist(),
                      entries["data_length"].tolist(), store_end)


def _read_store_bytes(stream: Any) -> memoryview:
    """Read exactly one store from a stream: header, keys table, then up to the end of the last array.

    The draft has no size field, but a consistent table fixes the store's
    end, so three reads take exactly the store and leave the stream at the
    next one. The table is checked before the third read, so a bad table
    never makes us read (or wait for) bytes that are not part of the store.
    """
    try:
        head = read_fixed(stream, HEADER.size, ERRORS, "header")
    except EOFError:
        raise _no_store() from None
    header = HEADER.unpack(head)
    _check_header(header)
    count = header.num_keys
    table = read_exactly(stream, ENTRY.size * count, ERRORS, f"keys table ({count} entries)",
                         offset=HEADER.size, prefix=head)
    entries = np.frombuffer(table, dtype=ENTRY.dtype, count=count, offset=HEADER.size)
    store_end = _check_table(header, entries, U64_MAX)[1]
    if store_end == len(table):
        return table
    return read_exactly(stream, store_end - len(table), ERRORS, "store (up to the end of the last array)",
                        offset=len(table), prefix=bytes(table))


LAYOUT = KeyedFormat(FORMAT_NAME, ERRORS, StoreClosedError, _parse_index, _read_store_bytes)


# --------------------------------------------------------------------------- writer

def _layout(prepared: list[Prepared]) -> tuple[bytes, np.ndarray, bytes]:
    """Header bytes, keys table and keys area of ``prepared`` (checked for what KAST cannot hold)."""
    count = len(prepared)
    if count > U32_MAX:
        raise UnsupportedError(f"kast: {count} keys do not fit the u32 num_keys field")
    area = b"\x00".join(prepared.keys) + b"\x00" if count else b""
    if area.count(0) != count:
        culprit = next(key for key in prepared.keys if 0 in key)
        raise UnsupportedError(f"kast: key {culprit!r} contains a NUL byte; KAST keys are NUL-terminated")
    key_lengths = np.fromiter(map(len, prepared.keys), dtype=np.uint64, count=count)
    if count and int(key_lengths.max()) > U32_MAX:
        raise UnsupportedError(f"kast: a key of {int(key_lengths.max())} bytes does not fit the u32 key_length field")
    table_end = KEYS_TABLE_OFFSET + ENTRY.size * count
    data_offset = round_up(table_end + len(area), ALIGNMENT)
    # Every start is a multiple of 8, so each array moves the next start on by its size rounded up to 8.
    table = ENTRY.empty(count)
    table["key_length"] = key_lengths
    table["key_offset"] = running_starts(key_lengths + np.uint64(1), table_end)
    table["data_type"] = prepared.codes
    table["data_length"] = prepared.lengths
    table["data_offset"] = running_starts(aligned(prepared.nbytes, ALIGNMENT), data_offset)
    header = HEADER.pack(magic=MAGIC, version_major=VERSION_MAJOR, version_minor=VERSION_MINOR, flags=0,
                         num_keys=count, keys_table_offset=KEYS_TABLE_OFFSET, data_offset=data_offset)
    return header, table, area


def _write(stream: BinaryIO, prepared: list[Prepared], layout: tuple[bytes, np.ndarray, bytes]) -> None:
    header, table, area = layout
    writer = Writer(stream)
    writer.write(header)
    writer.write(table)
    writer.write(area)
    writer.pad_to(ALIGNMENT)
    writer.write_aligned_arrays(prepared.arrays, ALIGNMENT)


# --------------------------------------------------------------------------- public API

def load(file: Any, read_all: bool = False, key_encoding: str = DEFAULT_KEY_ENCODING, engine: Any = None,
         storage_options: dict | None = None) -> Store:
    """Load a KAST store from a path (zero-copy map), fd or binary file object (``engine`` is ignored).

    A URL or fsspec file is read in ranges (``storage_options`` go to fsspec).
    """
    return load_store(LAYOUT, file, read_all, key_encoding, storage_options)


def loads(buffer: Any, read_all: bool = False, key_encoding: str = DEFAULT_KEY_ENCODING) -> Store:
    """Load the first KAST store in a bytes-like buffer; arrays are views of the buffer."""
    return load_buffer(LAYOUT, buffer, key_encoding)


def dump(data: Mapping, file: Any, key_encoding: str = DEFAULT_KEY_ENCODING, engine: Any = None) -> None:
    """Write ``data`` (str -> 1-D array) as KAST to a path (atomically), fd or binary file object."""
    prepared = prepare(data, key_encoding, FORMAT_NAME)
    layout = _layout(prepared)
    with output_stream(file) as stream:
        _write(stream, prepared, layout)


def dumps(data: Mapping, key_encoding: str = DEFAULT_KEY_ENCODING, engine: Any = None) -> bytes:
    """The KAST bytes of ``data`` (str -> 1-D array)."""
    prepared = prepare(data, key_encoding, FORMAT_NAME)
    layout = _layout(prepared)
    stream = io.BytesIO()
    _write(stream, prepared, layout)
    return stream.getvalue()


# --------------------------------------------------------------------------- registry protocol

def open(path: Any) -> Store:  # noqa: A001 - the registry protocol name
    """Open a KAST file (zero-copy map)."""
    return load(path)


def _layout_problems(store: Store) -> list[str]:
    """What loads but is not canonical: key order, non-zero reserved, header padding and padding bytes."""
    problems = []
    source = store.source
    head = source.view(0, HEADER.size, "header")
    for field in HEADER.nonzero_reserved(head):
        problems.append(f"kast: header.{field} at byte {HEADER.offsets[field]}: expected zero bytes")
    count = len(store)
    entries = ENTRY.read_array(source, KEYS_TABLE_OFFSET, count)
    key_offsets = entries["key_offset"].tolist()
    key_lengths = entries["key_length"].tolist()
    raw_keys = [bytes(source.view(offset, length, f"item {index} key"))
                for index, (offset, length) in enumerate(zip(key_offsets, key_lengths))]
    for index in range(1, count):
        if raw_keys[index - 1] >= raw_keys[index]:
            problems.append(f"kast: item {index} key at byte {key_offsets[index]}: expected keys sorted by their "
                            f"bytes, found {raw_keys[index]!r} after {raw_keys[index - 1]!r}")
    problems += padding_problems(store, key_offsets[-1] + key_lengths[-1] + 1 if count else KEYS_TABLE_OFFSET)
    return problems


def _store_problems(handle: BinaryIO, size: int) -> list[str]:
    """Problems of every store in an open file: the first, then any concatenated after it."""
    problems: list[str] = []
    index = 0
    while True:
        start = handle.tell()
        if index and start >= size:
            return problems
        where = "" if index == 0 else f"store {index} (concatenated after store {index - 1}, from byte {start} on"
        try:
            with load(handle) as store:
                # Layout findings count offsets from the store's first byte; load errors are file offsets.
                problems += [where + ("; its offsets count from there): " if index else "") + problem
                             for problem in _layout_problems(store)]
        except _errors.FormatError as error:
            return problems + [where + ("): " if index else "") + str(error)]
        index += 1


def validate(path: Any) -> list[str]:
    """Every problem of a KAST file: load errors, unsorted keys, non-zero reserved/padding, bad trailing bytes."""
    if is_remote(path) or is_url(path):
        remote = resolve(path)
        with remote.open() as stream:
            return _store_problems(stream, remote.size)
    with io.open(path, "rb") as handle:
        return _store_problems(handle, os.fstat(handle.fileno()).st_size)


def info(path: Any) -> dict:
    """Header facts and one row per key."""
    with load(path) as store:
        rows = entry_rows(store)
        total = sum(row["nbytes"] for row in rows)
        file_size = store.source.size  # the whole file: a path is mapped from byte 0
        return {
            "version": f"{store.header.version_major}.{store.header.version_minor}",
            "num_keys": len(store),
            "data_offset": store.header.data_offset,
            "store_size": store.file_size,
            "file_size": file_size,
            "trailing_bytes": file_size - store.file_size,
            "summary": f"{len(store)} keys, {total} bytes of array data",
            "items": rows,
        }


def entries(path: Any) -> list[dict]:
    """Rows for ``arrayio ls``: key, dtype, shape, size in bytes."""
    with load(path) as store:
        return entry_rows(store)


def cat(path: Any, name: str) -> Iterator[str]:
    """The values of one key, one per line."""
    return lines_of(load, path, name)


def demo(folder: Path) -> Path:
    """Write a sample KAST store of all ten dtypes, load it back and check every array."""
    return write_sample(dump, load, Path(folder) / "demo.kast")
