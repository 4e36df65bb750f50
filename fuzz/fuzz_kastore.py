"""Fuzz kastore (.kas): detect, open, info, validate, entries, and every key in every load mode."""

from __future__ import annotations

from _keyed_reads import read_keyed

import arrayio
from arrayio import kastore

FORMAT = "kastore"


def exercise(path: str, data: bytes) -> None:
    """Every public read path of the format over one input (the shared keyed read paths)."""
    read_keyed(arrayio, kastore, path, data)
