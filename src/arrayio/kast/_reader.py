"""Reading KAST stores: header, keys table and arrays, every range checked."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _keyed as keyed
from .._binary import U64_MAX, Source, read_exactly, round_up
from ..errors import Problem
from ._errors import ERRORS, NoStoreError, StoreClosedError
from ._records import (
    ALIGNMENT,
    DEFAULT_KEY_ENCODING,
    ENTRY,
    FORMAT_NAME,
    HEADER,
    KEYS_TABLE_OFFSET,
    MAGIC,
    VERSION_MAJOR,
)


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
    failure = keyed.first_failure([
        (types >= len(keyed.DTYPES), lambda i: ERRORS.invalid(
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
    itemsizes = keyed.ITEMSIZES[types]
    overflow = length > (np.uint64(U64_MAX) - start) // itemsizes
    end = np.where(overflow, limit, start + np.where(overflow, np.uint64(0), length * itemsizes))
    previous_end = np.concatenate((np.array([data_offset], dtype=np.uint64), end[:-1]))
    packed_start = keyed.aligned(previous_end, ALIGNMENT)

    def after_what(i: int) -> str:
        return "header.data_offset" if i == 0 else f"the end of item {i - 1}'s array"

    failure = keyed.first_failure([
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


def _parse_index(source: Source, key_encoding: str) -> keyed.KeyedIndex:
    """Read and check the header, keys table and keys area of the store at the start of ``source``.

    Every per-entry check is vectorised over the table, so opening costs
    O(number of keys); nothing is allocated beyond what the data holds.
    """
    if source.size == 0:
        raise KEYED.empty()
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
    keys = keyed.decode_keys(area.tobytes(), key_length.tolist(), table_end, key_encoding, ERRORS, separator=1)
    return keyed.KeyedIndex(header, keys, entries["data_type"].tolist(), entries["data_offset"].tolist(),
                      entries["data_length"].tolist(), store_end)


def _read_store_bytes(stream: Any) -> memoryview:
    """Read exactly one store from a stream: header, keys table, then up to the end of the last array.

    The draft has no size field, but a consistent table fixes the store's
    end, so three reads take exactly the store and leave the stream at the
    next one. The table is checked before the third read, so a bad table
    never makes us read (or wait for) bytes that are not part of the store.
    """
    head = keyed.read_fixed(stream, KEYED, "header")
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


def _canonical_problems(store: keyed.Store) -> list[Problem]:
    """What loads but is not canonical: key order, non-zero reserved, header padding and padding bytes."""
    problems = []
    source = store.source
    head = source.view(0, HEADER.size, "header")
    for field in HEADER.nonzero_reserved(head):
        problems.append(ERRORS.problem(f"header.{field}", HEADER.offsets[field], "zero bytes"))
    count = len(store)
    entries = ENTRY.read_array(source, KEYS_TABLE_OFFSET, count)
    key_offsets = entries["key_offset"].tolist()
    key_lengths = entries["key_length"].tolist()
    raw_keys = [bytes(source.view(offset, length, f"item {index} key"))
                for index, (offset, length) in enumerate(zip(key_offsets, key_lengths))]
    for index in range(1, count):
        if raw_keys[index - 1] >= raw_keys[index]:
            problems.append(ERRORS.problem(f"item {index} key", key_offsets[index], "keys sorted by their bytes",
                                           f"{raw_keys[index]!r} after {raw_keys[index - 1]!r}"))
    problems += keyed.padding_problems(store, key_offsets[-1] + key_lengths[-1] + 1 if count else KEYS_TABLE_OFFSET)
    return problems


KEYED = keyed.KeyedFormat(FORMAT_NAME, ERRORS, StoreClosedError, NoStoreError, HEADER.size, _parse_index,
                    _read_store_bytes, _canonical_problems, header_facts=("data_offset",))


load, loads = keyed.keyed_loaders(KEYED, DEFAULT_KEY_ENCODING)
