"""Fuzz KAST draft layout (.kast): detect, open, info, validate, entries, and every key in every load mode."""

from __future__ import annotations

from _keyed_reads import read_keyed

import arrayio
from arrayio import kast

FORMAT = "kast"


def exercise(path: str, data: bytes) -> None:
    """Every public read path of the format over one input (the shared keyed read paths)."""
    read_keyed(arrayio, kast, path, data)
