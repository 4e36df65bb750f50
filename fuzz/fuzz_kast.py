"""Fuzz KAST draft layout (.kast): detect, open, info, validate, entries, and every key in every load mode."""

from __future__ import annotations

import os

from _keyed_reads import read_keyed

import arrayio
from arrayio import kast

FORMAT = "kast"


def exercise(path: str, data: bytes) -> None:
    """Every public read path of the KAST draft layout over one input."""
    read_keyed(arrayio, kast, path, data)
    # Successive loads walk concatenated stores: a second store after the first.
    with open(path, "rb") as handle:
        try:
            kast.load(handle).close()
        except arrayio.FormatError:
            return
        if handle.tell() < len(data):
            kast.load(handle).close()
    fd = os.open(path, os.O_RDONLY)
    try:
        with kast.load(fd) as store:
            for key in store:
                store[key].sum()
    finally:
        os.close(fd)

