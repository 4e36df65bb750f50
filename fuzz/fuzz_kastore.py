"""Fuzz kastore (.kas): detect, open, info, validate, entries, and every key in every load mode."""

from __future__ import annotations

import os

from _keyed_reads import read_keyed

import arrayio
from arrayio import kastore

FORMAT = "kastore"


def exercise(path: str, data: bytes) -> None:
    """Every public read path of kastore over one input."""
    read_keyed(arrayio, kastore, path, data)
    # Successive loads walk concatenated stores: a second store after the first.
    with open(path, "rb") as handle:
        try:
            kastore.load(handle).close()
        except arrayio.FormatError:
            return
        if handle.tell() < len(data):
            kastore.load(handle).close()
    fd = os.open(path, os.O_RDONLY)
    try:
        with kastore.load(fd) as store:
            for key in store:
                store[key].sum()
    finally:
        os.close(fd)

