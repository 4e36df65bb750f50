"""Fuzz bloscpack (.blp): detect, open, info, validate, entries, every chunk, slices and the whole data."""

from __future__ import annotations

import io

from _common import read_mapped

from arrayio import bloscpack

FORMAT = "bloscpack"


def _read(reader: bloscpack.BloscpackFile) -> None:
    """Every chunk, a few slices along the first axis, then the whole array."""
    with reader:
        for index in range(reader.nchunks):
            reader.read_chunk(index)
        _ = reader.metadata
        if reader.shape and reader.order == "C":
            rows = reader.shape[0]
            reader[0:1]
            reader[rows // 3:(2 * rows) // 3 + 1]
            reader[-1:]
            reader[::max(1, rows // 2)]
            if rows:
                reader[rows - 1]
        reader.read()


def exercise(path: str, data: bytes) -> None:
    """Every public read path of bloscpack over one input."""
    if read_mapped(path, data, FORMAT, bloscpack.open, _read):  # unpack_*_from_file begin with that open too
        rows = bloscpack.entries(path)
        with bloscpack.open(path) as reader:
            for name in ("metadata", *(row["name"] for row in rows[:1])):
                for _ in reader.cat(name):
                    pass
        with bloscpack.open(path) as reader:
            numpy = reader.is_numpy
        if numpy:
            bloscpack.unpack_ndarray_from_file(path)
        else:
            bloscpack.unpack_bytes_from_file(path)
    _read(bloscpack.open(io.BytesIO(data)))
    with bloscpack.open(data) as reader:
        numpy = reader.is_numpy
        for _ in reader.iter_chunks():
            pass
    if numpy:
        bloscpack.unpack_ndarray_from_bytes(data)
    else:
        bloscpack.unpack_bytes_from_bytes(data)
