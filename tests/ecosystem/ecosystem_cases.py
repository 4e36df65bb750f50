"""The sample mapping the zarr, kerchunk and convert tests share (its keys cover the path rule's cases)."""

from __future__ import annotations

import numpy as np

KEYED = {
    "nodes/time": np.linspace(0.0, 5.0, 11),
    "nodes/flags": np.arange(11, dtype=np.uint32),
    "edges/left": np.arange(7, dtype=np.float64),
    "a": np.arange(5, dtype=np.int8),
    "a/b": np.arange(3, dtype=np.int64),
    "x/./y": np.arange(4, dtype=np.uint16),
    "__meta": np.arange(2, dtype=np.int32),
    "100% sure": np.arange(6, dtype=np.float32),
    "edges/zarr.json": np.arange(2, dtype=np.uint8),
    "big": np.arange(3000, dtype=np.int64),
}
