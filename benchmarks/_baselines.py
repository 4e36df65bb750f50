"""Native baselines more than one benchmark measures its views against."""

from __future__ import annotations

from pathlib import Path

import _rows


def kastore_key(folder: Path, size: int, key: str, repeat: int) -> tuple[Path, float, float]:
    """Write a kastore file whose ``key`` holds ``size`` bytes of int64 (plus a small key beside it);
    return (path, native read + copy s, memcpy of the same bytes s), page cache warm."""
    import numpy as np

    import arrayio.kastore as kastore

    path = folder / "big.kas"
    values = np.random.default_rng(1).integers(0, 2**62, size // 8, dtype=np.int64)
    kastore.dump({key: values, f"{key.rpartition('/')[0]}/small".lstrip("/"): np.arange(10)}, path)
    del values
    with kastore.load(path) as store:
        np.array(store[key])  # warm the page cache
        native = _rows.best(lambda: np.array(store[key]), repeat)
        in_memory = np.array(store[key])
    copy = _rows.best(in_memory.copy, repeat)
    return path, native, copy
