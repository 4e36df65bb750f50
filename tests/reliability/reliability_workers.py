"""Functions the concurrency tests run in fork-server children (importable by name there)."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from arrayio import bloscpack, kastore, pycauset

PIECE = 1000  # bytes of one appended piece


def piece(writer: int, index: int) -> bytes:
    """The bytes process ``writer`` appends the ``index``-th time: one value, unique to the pair."""
    return bytes([writer * 16 + index + 1]) * PIECE


def replace_with(case_name: str, target: str, inputs: str) -> None:
    """Run one writer case (from reliability_writers) to completion."""
    from reliability_writers import BY_NAME

    sys.stdout = open(os.devnull, "w")
    BY_NAME[case_name].run(Path(target), Path(inputs))


def dump_repeatedly(target: str, writer: int, times: int, started: Any) -> None:
    """Write the kastore file of ``writer`` over ``target`` ``times`` times."""
    data = kastore_content(writer)
    started.send(True)
    for _ in range(times):
        kastore.dump(data, target)


def kastore_content(writer: int) -> dict:
    """The content process ``writer`` writes: large enough that one dump takes several writes."""
    return {"who": np.full(70_000, writer, dtype=np.int64), "n": np.arange(1000 + writer)}


def pack_repeatedly(target: str, writer: int, times: int, started: Any) -> None:
    """Write the bloscpack file of ``writer`` over ``target`` ``times`` times."""
    data = np.full(300_000, writer + 1, dtype=np.uint8)
    started.send(True)
    for _ in range(times):
        bloscpack.pack_bytes_to_file(data.tobytes(), target, chunk_size=16_384)


def append_pieces(target: str, folder: str, writer: int, times: int, started: Any) -> None:
    """Append this process's pieces to the bloscpack file ``target``, one at a time."""
    started.send(True)
    for index in range(times):
        source = Path(folder) / f"piece-{writer}-{index}"
        source.write_bytes(piece(writer, index))
        bloscpack.append(target, source)


def rewrite_counter(target: str, times: int, started: Any) -> None:
    """Rewrite the bloscpack metadata ``times`` times with a rising counter."""
    started.send(True)
    for counter in range(1, times + 1):
        bloscpack.rewrite_metadata(target, {"counter": counter})


def update_properties(target: str, key: str, times: int, started: Any) -> None:
    """Set properties[key] to 0..times-1 in turn with pycauset update_metadata."""
    started.send(True)
    for value in range(times):
        pycauset.update_metadata(target, {"properties": {key: value}})


def append_one(target: str, source: str, done: Any) -> None:
    """One bloscpack append; reports when it returns."""
    bloscpack.append(target, source)
    done.send(True)
