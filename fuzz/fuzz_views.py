"""Fuzz the views of a file: the zarr store (every array's first and last chunk), the kerchunk
references and ``convert`` to a Zarr folder, over an input of any of the five formats.

A view may also answer UnsupportedError (a request the format cannot honour, such as references
to a compressed kdb image); anything else is a finding.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import arrayio
from arrayio.convert import convert
from arrayio.errors import FormatError, UnsupportedError
from arrayio.kerchunk import references
from arrayio._tree import Array
from arrayio.zarr import open_store

FORMAT = "views"
ALLOWED = (FormatError, UnsupportedError)


def _read_chunks(path: str) -> None:
    store = open_store(path)
    try:
        for _name, node in store.root.walk():
            if isinstance(node, Array) and all(node.grid):
                last = tuple(size - 1 for size in node.grid)
                for coords in {(0,) * len(node.grid), last}:
                    node.read(coords)
                    # what zarr is served: the file's bytes of a referencable chunk, or the encoded read
                    store.chunk_bytes("/".join([_name, "c", *map(str, coords)]) if _name else "c")
    finally:
        store.close()


def exercise(path: str, data: bytes) -> None:
    """The zarr view, the references and a conversion of one input (formats told apart by magic)."""
    if arrayio.detect(data) is None:
        return
    _read_chunks(path)
    references(path)
    target = Path(path).parent / "out.zarr"
    try:
        convert(path, target)
    finally:
        shutil.rmtree(target, ignore_errors=True)


def seeds(folder: Path):
    """The valid seeds of every format (their files are what the views see)."""
    root = Path(__file__).resolve().parent / "seeds"
    for format in ("kastore", "kast", "bloscpack", "kdb", "pycauset"):
        for seed in sorted((root / format).glob("valid-*"))[:8]:
            yield f"{format}-{seed.name[len('valid-'):]}", seed.read_bytes()
