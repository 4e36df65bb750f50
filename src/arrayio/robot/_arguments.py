"""Checks of the arguments the robot-learning datasets and loaders take: each names the argument and what
it got, where Python's own conversions would truncate a float, split a string into letters or fail with a
message about something else."""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np


def whole_number(name: str, value: Any, minimum: int) -> int:
    """``value`` as an int; TypeError unless it is an integer (not a float), ValueError below ``minimum``."""
    number = _integer(value)
    if number is None:
        raise TypeError(f"kdb: {name} must be a whole number, got {value!r}")
    if number < minimum:
        raise ValueError(f"kdb: {name} must be >= {minimum}, got {number}")
    return number


def _integer(value: Any) -> int | None:
    """``value`` as an int where it is an integer of any kind (Python, numpy, a 0-d tensor), else None (a
    bool too: True is no count or index)."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


def finite_number(name: str, value: Any, *, positive: bool = False) -> float:
    """``value`` as a float; ValueError unless it is a finite real number >= 0 (> 0 where ``positive``)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"kdb: {name} must be a number, got {value!r}") from None
    if not math.isfinite(number) or number < 0 or positive and number == 0:
        raise ValueError(f"kdb: {name} must be a finite number {'>' if positive else '>='} 0, got {value!r}")
    return number


def seconds(key: str, values: Any) -> list[float]:
    """The offsets in seconds that ``delta_timestamps[key]`` gives: a list of finite numbers."""
    if isinstance(values, (str, bytes)) or not isinstance(values, (Sequence, np.ndarray)):
        raise TypeError(f"kdb: delta_timestamps[{key!r}] must be a list of offsets in seconds, got {values!r}")
    found = []
    for position, value in enumerate(np.asarray(values, dtype=object).reshape(-1).tolist()):
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number) or isinstance(value, (str, bytes)):
            raise ValueError(f"kdb: delta_timestamps[{key!r}][{position}] must be a finite number of seconds, "
                             f"got {value!r}")
        found.append(number)
    return found


def camera_names(cameras: Any) -> list[str]:
    """``cameras`` as a list of camera names: one name alone, or a sequence of names."""
    if isinstance(cameras, str):
        return [cameras]
    names = list(cameras)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"kdb: cameras must be camera names (strings), got {name!r} in {cameras!r}")
    return names


def item_index(item: Any, what: str = "a frame") -> int:
    """One ``what`` index as an int; TypeError for anything but an integer (a float is not truncated)."""
    number = _integer(item)
    if number is None:
        raise TypeError(f"kdb: {what} index must be an integer, got {item!r}")
    return number


def item_indices(items: Any, what: str = "a frame") -> np.ndarray | None:
    """Indices (of ``what``) as a 1-d int64 array (None where one lies beyond int64: outside any dataset); TypeError
    for anything but integers, ValueError for none."""
    found = np.asarray(items).reshape(-1)
    if not len(found):
        raise ValueError(f"kdb: a batch needs at least one index ({what}), got none")
    if found.dtype.kind in "iu":
        return None if found.dtype.kind == "u" and int(found.max()) > _INT64_MAX else found.astype(np.int64, copy=False)
    given = items if isinstance(items, (list, tuple)) else found.tolist()  # [0, 1.5]: names 1.5, not 0.0
    numbers = [item_index(item, what) for item in given]  # the first non-integer raises
    return None if max(map(abs, numbers)) > _INT64_MAX else np.array(numbers, np.int64)


_INT64_MAX = int(np.iinfo(np.int64).max)
