"""Dimension names of the 1-D arrays of one group of a keyed store, so that a table reads as one xarray Dataset.

A group of keys is read as a table when it can be: a tree sequence's ``nodes``
group holds the columns ``time``, ``flags``, ... (one value per row), the
ragged columns ``metadata`` with their ``metadata_offset`` (rows + 1 offsets
into it), and so on. The rule, for the keys of one group named ``table``:

- the number of rows is one less than the length of an offset column
  (``<name>_offset`` beside ``<name>``); without one, the length most keys
  of the group share, when at least two do (or the group has one length);
- a column of that many values has the dimension ``table``; an offset
  column the dimension ``table_offset``; any other column its own,
  ``table_<name>`` (the ragged data of ``metadata`` is ``nodes_metadata``);
- at the root (no table) keys of one length share ``dim_<length>`` (a dimension named like its
  variable would make that variable an index coordinate, which xarray loads).

A name that would still stand for two lengths gets the length appended, so
the arrays of one group always form a Dataset.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

__all__ = ["dimension_names"]

_OFFSET = "_offset"


def _rows(lengths: Mapping[str, int]) -> int | None:
    for name, length in lengths.items():
        if name.endswith(_OFFSET) and name[:-len(_OFFSET)] in lengths and length > 0:
            return length - 1
    counts = Counter(lengths.values())
    common = counts.most_common(1)
    return common[0][0] if common and (common[0][1] >= 2 or len(counts) == 1) else None


def dimension_names(table: str, lengths: Mapping[str, int]) -> dict[str, str]:
    """The dimension name of each column (name -> length) of the group ``table`` ("" at the root)."""
    rows = _rows(lengths) if table else None
    names = {}
    for name, length in lengths.items():
        if not table:
            names[name] = f"dim_{length}"
        elif length == rows:
            names[name] = table
        elif rows is not None and length == rows + 1 and name.endswith(_OFFSET) and name[:-len(_OFFSET)] in lengths:
            names[name] = f"{table}{_OFFSET}"
        else:
            names[name] = f"{table}_{name}"
    sizes: dict[str, set[int]] = {}
    for name, dimension in names.items():
        sizes.setdefault(dimension, set()).add(lengths[name])
    return {name: dimension if len(sizes[dimension]) == 1 else f"{dimension}_{lengths[name]}"
            for name, dimension in names.items()}
