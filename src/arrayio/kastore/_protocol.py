"""The registry protocol of kastore: open, info, validate, entries, cat, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

from .._keyed import Store, lines_of, write_sample
from .._readers import entries_of, info_of, problems_of
from ..errors import Problem
from ._reader import load
from ._writer import dump


def open(path: Any, storage_options: dict | None = None) -> Store:  # noqa: A001 - the registry protocol name
    """Open a kastore file: a zero-copy map of a path, ranged reads of a URL (``storage_options`` go to fsspec)."""
    return load(path, storage_options=storage_options)


def validate(path: Any) -> list[Problem]:
    """Every problem of a kastore file: load errors, unsorted keys, non-zero reserved/padding, bad trailing bytes."""
    return problems_of(open, path)


def info(path: Any) -> dict:
    """Header facts and one row per key."""
    return info_of(open, path)


def entries(path: Any) -> list[dict]:
    """Rows for ``arrayio ls``: key, dtype, shape, size in bytes, sorted by key as ``kastore ls`` lists them."""
    return entries_of(open, path)


def cat(path: Any, name: str) -> Iterator[str]:
    """The values of one key, one per line (as ``kastore dump`` prints them)."""
    return lines_of(load, path, name)


def demo(folder: Path) -> Path:
    """Write a sample store of all ten dtypes, load it back and check every array."""
    return write_sample(dump, load, Path(folder) / "demo.kas")
