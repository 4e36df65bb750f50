"""Text lines of array values for the formats' ``cat``, formatted block by block.

``tolist()`` of a whole 400 MB array builds gigabytes of Python objects before the first line
appears; a block at a time keeps memory bounded and the first line immediate, with the same
text (``str`` of the Python value, as ``kastore dump`` prints it).

Byte arrays that hold text (a tskit file's ``format/name``, JSON metadata and schemas) print as
that text unless numbers are asked for: a person wants ``tskit.trees``, not ``116 115 107 ...``.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator

import numpy as np

BLOCK_VALUES = 1 << 16
TEXT_LIMIT = 16 << 20  # larger byte arrays are data, printed as numbers (and never decoded whole)
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def text_of(values: np.ndarray) -> str | None:
    """The text a 1-D uint8/int8 array holds when its bytes are printable UTF-8 (JSON indented), else None."""
    if values.dtype not in (np.uint8, np.int8) or values.ndim != 1 or not 0 < values.size <= TEXT_LIMIT:
        return None
    try:
        text = values.tobytes().decode("utf-8")
    except UnicodeDecodeError:
        return None
    if _CONTROL.search(text):
        return None
    if text.lstrip()[:1] in ("{", "["):
        with contextlib.suppress(ValueError):  # not JSON after all: shown as it is
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    return text


def value_lines(values: np.ndarray, numbers: bool = False) -> Iterator[str]:
    """Each value of ``values`` (flattened in storage order) as one line of text; a byte array that holds
    text prints as its lines instead, unless ``numbers``."""
    text = None if numbers else text_of(values)
    if text is not None:
        yield from text.splitlines()
        return
    flat = values.ravel(order="K")
    for start in range(0, flat.size, BLOCK_VALUES):
        for value in flat[start:start + BLOCK_VALUES].tolist():
            yield value if isinstance(value, str) else str(value)


def row_lines(matrix: np.ndarray) -> Iterator[str]:
    """Each row of a 2-D ``matrix`` as one line of space-separated values."""
    rows_per_block = max(1, BLOCK_VALUES // max(1, matrix.shape[1]))
    for start in range(0, matrix.shape[0], rows_per_block):
        for row in matrix[start:start + rows_per_block].tolist():
            yield " ".join(map(str, row))
