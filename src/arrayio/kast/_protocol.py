"""The registry protocol of the KAST layout: open, info, validate, entries, cat, demo."""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from .. import errors as _errors
from .._keyed import (
    Store,
    entry_rows,
    lines_of,
    padding_problems,
    write_sample,
)
from ._reader import load
from ._records import ENTRY, HEADER, KEYS_TABLE_OFFSET
from ._writer import dump


def open(path: Any) -> Store:  # noqa: A001 - the registry protocol name
    """Open a KAST file (zero-copy map)."""
    return load(path)


def _canonical_problems(store: Store) -> list[str]:
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
                             for problem in _canonical_problems(store)]
        except _errors.FormatError as error:
            return problems + [where + ("): " if index else "") + str(error)]
        index += 1


def validate(path: Any) -> list[str]:
    """Every problem of a KAST file: load errors, unsorted keys, non-zero reserved/padding, bad trailing bytes."""
    with io.open(path, "rb") as handle:
        return _store_problems(handle, os.fstat(handle.fileno()).st_size)


def info(path: Any) -> dict:
    """Header facts and one row per key."""
    with load(path) as store:
        rows = entry_rows(store)
        total = sum(row["nbytes"] for row in rows)
        file_size = os.path.getsize(path)
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
