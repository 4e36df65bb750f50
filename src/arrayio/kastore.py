"""kastore (file version 1.0): a store of string keys -> 1-D numpy arrays.

API-compatible with PyPI ``kastore`` 0.3.6 (``import arrayio.kastore as
kastore`` works), byte-identical output, zero-copy loading from paths, linear
cost in the number of keys, and errors that name the field, item and byte
offset. The byte layout and every decision are in docs/formats/kastore.md.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO, Iterator

import numpy as np

from . import errors as _errors
from ._binary import Record, Source, Writer, output_stream, read_exactly, round_up
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
    "load", "loads", "dump", "dumps", "Store", "ValueInfo",
    "KastoreException", "FileFormatError", "VersionTooOldError", "VersionTooNewError", "StoreClosedError",
    "FORMAT_NAME", "open", "info", "validate", "entries", "cat", "demo",
]

FORMAT_NAME = "kastore"
MAGIC = b"\x89KAS\r\n\x1a\n"
VERSION_MAJOR = 1
VERSION_MINOR = 0
ALIGNMENT = 8
PY_ENGINE = "python"
C_ENGINE = "c"
DEFAULT_KEY_ENCODING = "utf-8"

HEADER = Record("header", [
    ("magic", "8s"), ("version_major", "<u2"), ("version_minor", "<u2"),
    ("num_items", "<u4"), ("file_size", "<u8"), ("reserved", "40s"),
], size=64)

ITEM = Record("item descriptor", [
    ("type", "u1"), ("reserved_after_type", "7s"), ("key_start", "<u8"), ("key_len", "<u8"),
    ("array_start", "<u8"), ("array_len", "<u8"), ("reserved", "24s"),
], size=64)


class KastoreException(Exception):
    """Base of the kastore-compatible exceptions (as in PyPI kastore)."""


class FileFormatError(KastoreException, _errors.FormatError):
    """The bytes are not a valid kastore file."""


class TruncatedFileError(FileFormatError, _errors.TruncatedError):
    """A kastore range runs past the end of the data."""


class VersionTooOldError(KastoreException, _errors.VersionTooOldError):
    """The file's major version is older than 1."""


class VersionTooNewError(KastoreException, _errors.VersionTooNewError):
    """The file's major version is newer than 1."""


class StoreClosedError(KastoreException, ArrayIOError):
    """The store was closed; its arrays can no longer be looked up."""


ERRORS = ErrorKinds(FORMAT_NAME, format_error=FileFormatError, truncated=TruncatedFileError,
                    too_old=VersionTooOldError, too_new=VersionTooNewError)


# --------------------------------------------------------------------------- reader

def _parse_index(source: Source, key_encoding: str) -> KeyedIndex:
    """Read and check the header, descriptors and keys of the store at the start of ``source``.

    Implements kastore's canonical-packing rules with every check vectorised
    over the descriptor table, so opening costs O(number of keys).
    """
    if source.size == 0:
        raise EOFError("End of file")
    header = HEADER.read(source, 0)
    ERRORS.check_magic("header.magic", 0, MAGIC, header.magic)
    ERRORS.check_version("header.version_major", HEADER.offsets["version_major"], VERSION_MAJOR,
                         header.version_major)
    file_size = header.file_size
    count = header.num_items
    table_end = HEADER.size + ITEM.size * count
    if file_size < HEADER.size:
        raise ERRORS.invalid("header.file_size", HEADER.offsets["file_size"], f">= {HEADER.size}", file_size)
    if table_end > file_size:
        raise ERRORS.invalid("header.file_size", HEADER.offsets["file_size"],
                             f">= {table_end} (header + {count} item descriptors)", file_size)
    source.check(0, file_size, "store (header.file_size)")
    items = ITEM.read_array(source, HEADER.size, count, what=f"item descriptor table ({count} entries)")

    def offset(field: str, index: int) -> int:
        return ITEM.offset_of(field, HEADER.size, index)

    types = items["type"]
    key_start = items["key_start"]
    key_len = items["key_len"]
    array_start = items["array_start"]
    array_len = items["array_len"]
    limit = np.uint64(file_size)
    failure = first_failure([
        (types >= len(DTYPES), lambda i: ERRORS.invalid(
            f"item {i} type", offset("type", i), "a type code 0..9", int(types[i]))),
        ((key_start > limit) | (key_len > limit - np.minimum(key_start, limit)), lambda i: ERRORS.invalid(
            f"item {i} key range", offset("key_start", i), f"inside the store's {file_size} bytes",
            f"key_start {int(key_start[i])}, key_len {int(key_len[i])}")),
        (key_len == 0, lambda i: ERRORS.invalid(f"item {i} key_len", offset("key_len", i), "a non-empty key", 0)),
    ])
    if failure is not None:
        raise failure
    # All lengths are now bounded by file_size, so the sums below cannot wrap.
    itemsizes = ITEMSIZES[types]
    array_bytes_ok = array_len <= limit // itemsizes
    array_in_file = array_bytes_ok & (array_start <= limit) & (
        np.where(array_bytes_ok, array_len * itemsizes, limit) <= limit - np.minimum(array_start, limit))
    failure = first_failure([
        (~array_in_file, lambda i: ERRORS.invalid(
            f"item {i} array range", offset("array_start", i), f"inside the store's {file_size} bytes",
            f"array_start {int(array_start[i])}, array_len {int(array_len[i])} x {int(itemsizes[i])} bytes")),
    ])
    if failure is not None:
        raise failure
    nbytes = np.where(array_bytes_ok, array_len * itemsizes, np.uint64(0))
    expected_key_start = running_starts(key_len, table_end)
    keys_end = table_end + int(key_len.sum(dtype=np.uint64))
    array_end = array_start + nbytes
    previous_end = np.concatenate((np.array([keys_end], dtype=np.uint64), array_end[:-1]))
    expected_array_start = aligned(previous_end, ALIGNMENT)
    failure = first_failure([
        (key_start != expected_key_start, lambda i: ERRORS.invalid(
            f"item {i} key_start", offset("key_start", i),
            f"{int(expected_key_start[i])} (keys packed in descriptor order after the table)", int(key_start[i]))),
        (array_start != expected_array_start, lambda i: ERRORS.invalid(
            f"item {i} array_start", offset("array_start", i),
            f"{int(expected_array_start[i])} (arrays packed in order, each at the next multiple of 8)",
            int(array_start[i]))),
    ])
    if failure is not None:
        raise failure
    store_end = int(array_end[-1]) if count else table_end
    if store_end != file_size:
        raise ERRORS.invalid("header.file_size", HEADER.offsets["file_size"],
                             f"{store_end} (the end of the last array)", file_size)
    area = bytes(source.view(table_end, keys_end - table_end, "keys"))
    keys = decode_keys(area, key_len.tolist(), table_end, key_encoding, ERRORS)
    return KeyedIndex(header, keys, types.tolist(), array_start.tolist(), array_len.tolist(), file_size)


def _read_store_bytes(stream: Any) -> memoryview:
    """Read exactly one store from a stream (header, then file_size - 64 bytes), nothing more."""
    head = read_fixed(stream, HEADER.size, ERRORS, "header")
    header = HEADER.unpack(head)
    if header.magic != MAGIC or header.version_major != VERSION_MAJOR or header.file_size <= HEADER.size:
        return memoryview(head)
    return read_exactly(stream, header.file_size - HEADER.size, ERRORS, "store (header.file_size)",
                        offset=HEADER.size, prefix=head)


LAYOUT = KeyedFormat(FORMAT_NAME, ERRORS, StoreClosedError, _parse_index, _read_store_bytes)


# --------------------------------------------------------------------------- writer

def _layout(prepared: list[Prepared]) -> tuple[bytes, np.ndarray, int]:
    """Header bytes, descriptor table and total size of the canonical layout."""
    count = len(prepared)
    if count > 0xFFFFFFFF:
        raise UnsupportedError(f"kastore: {count} items do not fit the u32 num_items field")
    table = ITEM.empty(count)
    key_lengths = np.fromiter(map(len, prepared.keys), dtype=np.uint64, count=count)
    nbytes = prepared.nbytes
    table_end = HEADER.size + ITEM.size * count
    key_starts = running_starts(key_lengths, table_end)
    # Every start is a multiple of 8, so each array moves the next start on by its size rounded up to 8.
    array_starts = running_starts(aligned(nbytes, ALIGNMENT), round_up(table_end + int(key_lengths.sum()), ALIGNMENT))
    position = int(array_starts[-1] + nbytes[-1]) if count else table_end
    table["type"] = prepared.codes
    table["key_start"] = key_starts
    table["key_len"] = key_lengths
    table["array_start"] = array_starts
    table["array_len"] = prepared.lengths
    header = HEADER.pack(magic=MAGIC, version_major=VERSION_MAJOR, version_minor=VERSION_MINOR,
                         num_items=count, file_size=position)
    return header, table, position


def _write(stream: BinaryIO, prepared: list[Prepared]) -> int:
    header, table, total = _layout(prepared)
    writer = Writer(stream)
    writer.write(header)
    writer.write(table)
    writer.write(b"".join(prepared.keys))
    writer.write_aligned_arrays(prepared.arrays, ALIGNMENT)
    return total


# --------------------------------------------------------------------------- public API

def load(file: Any, read_all: bool = False, key_encoding: str = DEFAULT_KEY_ENCODING, engine: Any = None,
         storage_options: dict | None = None) -> Store:
    """Load a store from a path, fd or binary file object (``engine`` is accepted and ignored).

    A URL or fsspec file is read in ranges (``storage_options`` go to fsspec).
    """
    return load_store(LAYOUT, file, read_all, key_encoding, storage_options)


def loads(buffer: Any, read_all: bool = False, key_encoding: str = DEFAULT_KEY_ENCODING) -> Store:
    """Load the first store in a bytes-like buffer; arrays are views of the buffer."""
    return load_buffer(LAYOUT, buffer, key_encoding)


def dump(data: Mapping, file: Any, key_encoding: str = DEFAULT_KEY_ENCODING, engine: Any = None) -> None:
    """Write ``data`` (str -> 1-D array) to a path (atomically), fd or binary file object."""
    prepared = prepare(data, key_encoding, FORMAT_NAME)
    with output_stream(file) as stream:
        _write(stream, prepared)


def dumps(data: Mapping, key_encoding: str = DEFAULT_KEY_ENCODING, engine: Any = None) -> bytes:
    """The kastore bytes of ``data`` (str -> 1-D array)."""
    stream = io.BytesIO()
    _write(stream, prepare(data, key_encoding, FORMAT_NAME))
    return stream.getvalue()


# --------------------------------------------------------------------------- registry protocol

def open(path: Any) -> Store:  # noqa: A001 - the registry protocol name
    """Open a kastore file (zero-copy map)."""
    return load(path)


def _problems_beyond_loading(path: Any) -> list[str]:
    """What loads but is not canonical: key order, reserved and padding bytes."""
    problems = []
    with load(path) as store:
        source = store.source
        keys = list(store)
        encoded = [key.encode(DEFAULT_KEY_ENCODING) for key in keys]
        head = source.view(0, HEADER.size, "header")
        for field in HEADER.nonzero_reserved(head):
            problems.append(f"kastore: header.{field} at byte {HEADER.offsets[field]}: expected zero bytes")
        table = source.view(HEADER.size, ITEM.size * len(keys), "item descriptor table")
        for index in range(len(keys)):
            for field in ITEM.nonzero_reserved(table, index * ITEM.size):
                problems.append(f"kastore: item {index} {field} at byte "
                                f"{ITEM.offset_of(field, HEADER.size, index)}: expected zero bytes")
        key_offsets = running_starts(np.array([len(key) for key in encoded], dtype=np.uint64),
                                     HEADER.size + ITEM.size * len(keys)).tolist()
        for index in range(1, len(encoded)):
            if encoded[index - 1] > encoded[index]:
                problems.append(f"kastore: item {index} key at byte {key_offsets[index]}: expected keys sorted "
                                f"by UTF-8 bytes, found {keys[index]!r} after {keys[index - 1]!r}")
        problems += padding_problems(store, key_offsets[-1] + len(encoded[-1]) if keys else HEADER.size)
    return problems


def validate(path: Any) -> list[str]:
    """Every problem of a kastore file: load errors, then unsorted keys and non-zero reserved/padding bytes."""
    try:
        return _problems_beyond_loading(path)
    except EOFError:
        return ["kastore: the file is empty (no store)"]
    except _errors.FormatError as error:
        return [str(error)]


def info(path: Any) -> dict:
    """Header facts and one row per key."""
    with load(path) as store:
        rows = entry_rows(store)
        total = sum(row["nbytes"] for row in rows)
        return {
            "version": f"{store.header.version_major}.{store.header.version_minor}",
            "num_items": len(store),
            "file_size": store.file_size,
            "summary": f"{len(store)} keys, {total} bytes of array data",
            "items": rows,
        }


def entries(path: Any) -> list[dict]:
    """Rows for ``arrayio ls``: key, dtype, shape, size in bytes, sorted by key as ``kastore ls`` lists them."""
    with load(path) as store:
        return sorted(entry_rows(store), key=lambda row: row["name"])


def cat(path: Any, name: str) -> Iterator[str]:
    """The values of one key, one per line (as ``kastore dump`` prints them)."""
    return lines_of(load, path, name)


def demo(folder: Path) -> Path:
    """Write a sample store of all ten dtypes, load it back and check every array."""
    return write_sample(dump, load, Path(folder) / "demo.kas")
