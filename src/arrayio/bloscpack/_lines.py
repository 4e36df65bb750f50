"""What ``arrayio cat`` prints of a bloscpack entry: the reader's ``cat``, kept beside the reader."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

from .._text import value_lines
from ._errors import ERRORS


class EntryLines:
    """``cat(name)`` of the bloscpack reader (a mixin: the reader module stays within its size)."""

    def cat(self: Any, name: str) -> Iterator[str]:
        """Lines for ``arrayio cat``: ``data`` prints every value (storage order), ``chunkN`` one chunk's
        values, ``metadata`` the JSON metadata."""
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
            yield from value_lines(chunk.view(self.dtype))
            return
        if name != "data":
            raise KeyError(name)
        if self.order != "C" or not self.shape:
            yield from value_lines(self.read())
            return
        per_row = max(1, math.prod(self.shape[1:]))
        step = max(1, (1 << 20) // per_row)
        for low in range(0, self.shape[0], step):
            yield from value_lines(self[low:low + step])
