"""What ``arrayio ls`` and ``cat`` show of a bloscpack file: the reader's ``entries`` and ``cat``."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from .._text import TEXT_LIMIT, value_lines
from ._errors import ERRORS
from ._records import decode_blosc_flags


class EntryLines:
    """``entries()`` and ``cat(name)`` of the bloscpack reader: what ``arrayio ls`` and ``cat`` show (a mixin,
    so the reader module stays within its size)."""

    def entries(self: Any) -> list[dict[str, Any]]:
        """One row per chunk: name ``chunkN``, byte offset, compressed and uncompressed sizes, codec."""
        rows = []
        for index in range(self.nchunks):
            position, header = self.chunk_location(index)
            flags = decode_blosc_flags(header.flags)
            shuffle = "bit" if flags["bit_shuffle"] else "byte" if flags["byte_shuffle"] else "none"
            rows.append({"name": f"chunk{index}", "offset": position, "cbytes": header.cbytes,
                         "nbytes": header.nbytes, "codec": "memcpy" if flags["pure_memcpy"] else flags["codec"],
                         "shuffle": shuffle})
        return rows


    def cat(self: Any, name: str, numbers: bool = False) -> Iterator[str]:
        """Lines for ``arrayio cat``: ``data`` prints every value (storage order), ``chunkN`` one chunk's
        values, ``metadata`` the JSON metadata; a byte stream that is text prints as text unless ``numbers``."""
        nchunks = self.nchunks
        if name == "metadata":
            yield json.dumps(self.metadata, indent=2, ensure_ascii=False)
            return
        if name.startswith("chunk") and name[5:].isdigit():
            index = int(name[5:])
            if not 0 <= index < nchunks:
                raise KeyError(name)
            chunk = self.read_chunk(index)
            if len(chunk) % self.dtype.itemsize:
                raise ERRORS.invalid(f"chunk {index}", self.chunk_location(index)[0],
                                     f"a whole number of {self.dtype.itemsize}-byte items", f"{len(chunk)} bytes")
            yield from value_lines(chunk.view(self.dtype), numbers)
            return
        if name != "data":
            raise KeyError(name)
        small_vector = len(self.shape) == 1 and self.nbytes is not None and self.nbytes <= TEXT_LIMIT
        if self.order != "C" or not self.shape or small_vector:  # a small vector may be text: read it whole
            yield from value_lines(self.read(), numbers)
            return
        per_row = max(1, math.prod(self.shape[1:]))
        step = max(1, (1 << 20) // per_row)
        for low in range(0, self.shape[0], step):
            yield from value_lines(self[low:low + step])
