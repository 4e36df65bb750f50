"""The registry protocol for the pycauset container: info, validate, entries, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._binary import Source
from .._readers import entries_of, info_of, problems_of
from ..errors import FormatError, Problem
from ._errors import ERRORS
from ._reader import Container, load, source_problems
from ._writer import save, update_metadata


def info(path: Any) -> dict[str, Any]:
    """Both slots, the active one, the matrix identity and the metadata tree, JSON-friendly."""
    return info_of(open, path)


def _unopenable(path: Any, error: FormatError) -> list[Problem]:
    # A file with no valid slot does not load; the slots and blocks can still be judged one by one.
    with Source.open(path, ERRORS) as source:
        return source_problems(source)


def validate(path: Any) -> list[Problem]:
    """Every problem found: preamble, both slots (CRC, alignment, ranges), blocks, identity, payload length."""
    return problems_of(open, path, _unopenable)


def entries(path: Any) -> list[dict[str, Any]]:
    """The matrix and each top-level metadata key, as rows for ``arrayio ls``."""
    return entries_of(open, path)


def open(path: Any, storage_options: dict | None = None) -> Container:  # noqa: A001 - the protocol's name
    """Open a ``.pycauset`` file (the same as :func:`load`)."""
    return load(path, storage_options)


def demo(folder: Path) -> Path:
    """Write a small matrix with properties, update its metadata once, read it back and check it."""
    path = Path(folder) / "demo.pycauset"
    matrix = np.arange(12, dtype=np.float64).reshape(3, 4) / 4
    save(matrix, path, properties={"is_demo": True})
    update_metadata(path, {"provenance": {"tool": "arrayio demo"}})
    with load(path) as container:
        if not np.array_equal(container.array, matrix) or container.generation != 2:
            raise RuntimeError("pycauset demo: the file did not read back equal")
        if container.metadata["provenance"] != {"tool": "arrayio demo"}:
            raise RuntimeError("pycauset demo: the metadata update did not read back")
    return path
