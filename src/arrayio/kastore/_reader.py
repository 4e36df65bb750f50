"""Reading kastore stores: the canonical-packing checks, vectorised over the descriptor table."""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import _keyed as keyed
from .._binary import Source, read_exactly
from ..errors import Problem
from ._errors import ERRORS, KeyDecodeError, NoStoreError, StoreClosedError
from ._records import (
    ALIGNMENT,
    DEFAULT_KEY_ENCODING,
    FORMAT_NAME,
    HEADER,
    ITEM,
    MAGIC,
    VERSION_MAJOR,
)


def _parse_index(source: Source, key_encoding: str) -> keyed.KeyedIndex:
    """Read and check the header, descriptors and keys of the store at the start of ``source``.

    Implements kastore's canonical-packing rules with every check vectorised
    over the descriptor table, so opening costs O(number of keys).
    """
    if source.size == 0:
        raise KEYED.empty()
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
    failure = keyed.first_failure([
        (types >= len(keyed.DTYPES), lambda i: ERRORS.invalid(
            f"item {i} type", offset("type", i), "a type code 0..9", int(types[i]))),
        ((key_start > limit) | (key_len > limit - np.minimum(key_start, limit)), lambda i: ERRORS.invalid(
            f"item {i} key range", offset("key_start", i), f"inside the store's {file_size} bytes",
            f"key_start {int(key_start[i])}, key_len {int(key_len[i])}")),
        (key_len == 0, lambda i: ERRORS.invalid(f"item {i} key_len", offset("key_len", i), "a non-empty key", 0)),
    ])
    if failure is not None:
        raise failure
    # All lengths are now bounded by file_size, so the sums below cannot wrap.
    itemsizes = keyed.ITEMSIZES[types]
    array_bytes_ok = array_len <= limit // itemsizes
    array_in_file = array_bytes_ok & (array_start <= limit) & (
        np.where(array_bytes_ok, array_len * itemsizes, limit) <= limit - np.minimum(array_start, limit))
    failure = keyed.first_failure([
        (~array_in_file, lambda i: ERRORS.invalid(
            f"item {i} array range", offset("array_start", i), f"inside the store's {file_size} bytes",
            f"array_start {int(array_start[i])}, array_len {int(array_len[i])} x {int(itemsizes[i])} bytes")),
    ])
    if failure is not None:
        raise failure
    nbytes = np.where(array_bytes_ok, array_len * itemsizes, np.uint64(0))
    expected_key_start = keyed.running_starts(key_len, table_end)
    keys_end = table_end + int(key_len.sum(dtype=np.uint64))
    array_end = array_start + nbytes
    previous_end = np.concatenate((np.array([keys_end], dtype=np.uint64), array_end[:-1]))
    expected_array_start = keyed.aligned(previous_end, ALIGNMENT)
    failure = keyed.first_failure([
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
    keys = keyed.decode_keys(area, key_len.tolist(), table_end, key_encoding, ERRORS, decode_error=KeyDecodeError)
    return keyed.KeyedIndex(header, keys, types.tolist(), array_start.tolist(), array_len.tolist(), file_size)


def _read_store_bytes(stream: Any) -> memoryview:
    """Read exactly one store from a stream (header, then file_size - 64 bytes), nothing more."""
    head = keyed.read_fixed(stream, KEYED, "header")
    header = HEADER.unpack(head)
    if header.magic != MAGIC or header.version_major != VERSION_MAJOR or header.file_size <= HEADER.size:
        return memoryview(head)
    return read_exactly(stream, header.file_size - HEADER.size, ERRORS, "store (header.file_size)",
                        offset=HEADER.size, prefix=head)


def _canonical_problems(store: keyed.Store) -> list[Problem]:
    """What loads but is not canonical: key order, reserved and padding bytes."""
    problems = []
    source = store.source
    keys = list(store)
    encoded = [key.encode(DEFAULT_KEY_ENCODING) for key in keys]
    head = source.view(0, HEADER.size, "header")
    for field in HEADER.nonzero_reserved(head):
        problems.append(ERRORS.problem(f"header.{field}", HEADER.offsets[field], "zero bytes"))
    table = source.view(HEADER.size, ITEM.size * len(keys), "item descriptor table")
    for index in range(len(keys)):
        for field in ITEM.nonzero_reserved(table, index * ITEM.size):
            problems.append(ERRORS.problem(f"item {index} {field}", ITEM.offset_of(field, HEADER.size, index),
                                           "zero bytes"))
    key_offsets = keyed.running_starts(np.array([len(key) for key in encoded], dtype=np.uint64),
                                 HEADER.size + ITEM.size * len(keys)).tolist()
    for index in range(1, len(encoded)):
        if encoded[index - 1] > encoded[index]:
            problems.append(ERRORS.problem(f"item {index} key", key_offsets[index], "keys sorted by UTF-8 bytes",
                                           f"{keys[index]!r} after {keys[index - 1]!r}"))
    problems += keyed.padding_problems(store, key_offsets[-1] + len(encoded[-1]) if keys else HEADER.size)
    return problems


KEYED = keyed.KeyedFormat(FORMAT_NAME, ERRORS, StoreClosedError, NoStoreError, HEADER.size, _parse_index,
                    _read_store_bytes, _canonical_problems, entries_sorted=True)


load, loads = keyed.keyed_loaders(KEYED, DEFAULT_KEY_ENCODING)
