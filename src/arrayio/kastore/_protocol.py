"""The registry protocol of kastore: open, info, validate, entries, cat, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import numpy as np

from .. import errors as _errors
from .._keyed import (
    Store,
    entry_rows,
    lines_of,
    padding_problems,
    running_starts,
    write_sample,
)
from ._reader import load
from ._records import DEFAULT_KEY_ENCODING, HEADER, ITEM
from ._writer import dump


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
