"""Text lines of array values for the formats' ``cat``, formatted block by block.

``tolist()`` of a whole 400 MB array builds gigabytes of Python objects before the first line
appears; a block at a time keeps memory bounded and the first line immediate, with the same
text (``str`` of the Python value, as ``kastore dump`` prints it).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

BLOCK_VALUES = 1 << 16


def value_lines(values: np.ndarray) -> Iterator[str]:
    """Each value of ``values`` (flattened in storage order) as one line of text."""
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
