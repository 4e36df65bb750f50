"""The read paths kastore and kast share: the generic API, then each load mode reading every key."""

from __future__ import annotations

import io
import os
from types import ModuleType

from _common import read_mapped


def read_store(store) -> None:
    """Touch every key's array (and its info), then close the store."""
    with store:
        for key in store:
            store[key].sum()
            store.info(key)
        len(store)


def read_keyed(arrayio: ModuleType, module: ModuleType, path: str, data: bytes) -> None:
    """detect, validate, the mapped load, then (when that loads) info, entries and cat; then the other
    load modes (read_all, bytes, file object, concatenated stores, a raw fd), reading every key each time."""
    if read_mapped(path, data, module.FORMAT_NAME, module.open, read_store):
        rows = module.entries(path)
        with module.open(path) as reader:
            for row in rows[:1]:
                for _ in reader.cat(row["name"]):
                    pass
    read_store(module.load(path, read_all=True))
    read_store(module.loads(data))
    read_store(module.load(io.BytesIO(data)))
    # Successive loads walk concatenated stores: a second store after the first.
    with open(path, "rb") as handle:
        try:
            module.load(handle).close()
        except arrayio.FormatError:
            return
        if handle.tell() < len(data):
            module.load(handle).close()
    fd = os.open(path, os.O_RDONLY)
    try:
        read_store(module.load(fd))
    finally:
        os.close(fd)
