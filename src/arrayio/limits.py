"""The sizes a file may make arrayio allocate: named limits with defaults the user can raise.

A small file can declare a huge size (an image header claiming 8192x8192
pixels, a chunk claiming 2 GiB, a computed matrix of 2^31 rows); every reader
checks such a declared size here, once per kind, before it takes the memory.
What is over a limit raises :class:`arrayio.errors.LimitError` (a
``FormatError``) that names the limit, the size and how to raise it. One limit is a budget instead, and
off unless set: ``remote_cache_bytes``, what all remote objects' caches of a process hold together (past it
the least recently used ranges are dropped, nothing raises).

Raise a limit for a block of code, process-wide, or from the environment
(read when a limit is asked for, so DataLoader workers and CLI runs see it)::

    with arrayio.limits.raised(chunk_bytes=4 << 30):
        data = blp.open("huge.blp")[0:10]
    arrayio.limits.set(image_bytes=512 << 20)
    ARRAYIO_LIMITS="chunk_bytes=4G,image_bytes=512M" arrayio convert ...
"""

from __future__ import annotations

import contextlib
import os
import threading
from dataclasses import dataclass
from typing import Iterator

from .errors import LimitError

__all__ = ["Limit", "LIMITS", "NO_BUDGET", "get", "set", "raised", "check", "LimitError", "ENVIRONMENT"]

ENVIRONMENT = "ARRAYIO_LIMITS"
# The default of a budget that is off: more bytes than any process holds. A budget below what a process reads
# at random makes each read evict what the next one needs: over 81 MB of remote shards, FrameDataset workers
# with 16-48 MiB budgets sent 54-88 requests a batch (0.4 without) at 0.02-0.03 of local files' rate.
NO_BUDGET = 1 << 62


@dataclass(frozen=True)
class Limit:
    """One named limit: its default and what it bounds (the unit is bytes unless ``unit`` says otherwise)."""

    name: str
    default: int
    bounds: str
    unit: str = "bytes"


LIMITS = {limit.name: limit for limit in (
    Limit("image_bytes", 64 << 20,
          "decoded bytes of one camera image (kdb JPEG/PNG beyond the codec's 1100:1 expansion) or video frame"),
    Limit("chunk_bytes", 256 << 20,
          "decoded bytes of one compressed chunk held at once; larger chunks are decoded block by block"),
    Limit("row_block_bytes", 64 << 20, "bytes of one block of rows of a computed array (pycauset matrices)"),
    Limit("graph_tasks", 200_000, "tasks of one dask graph (one per chunk)", unit="tasks"),
    Limit("references", 1_000_000, "entries (chunk references and metadata) of one reference set (kerchunk)",
          unit="references"),
    Limit("npz_member_bytes", 256 << 20, "decompressed bytes of one .npz member read at once"),
    # Off by default: a budget below what a process reads at random makes nearly every read miss (NO_BUDGET).
    Limit("remote_cache_bytes", NO_BUDGET,
          "fetched bytes that all remote objects' caches of one process hold together (a budget, not a check: "
          "past it the least recently used ranges are dropped; none unless set)"),
)}

_SUFFIXES = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_lock = threading.Lock()
_set: dict[str, int] = {}


def _parse(text: str, origin: str) -> int:
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    number, suffix = (text[:-1], text[-1]) if text[-1:] in _SUFFIXES else (text, "")
    try:
        value = int(float(number) * _SUFFIXES[suffix])
    except ValueError:
        raise ValueError(f"{origin}: {text!r} is not a size (a number with an optional K, M, G or T)") from None
    if value < 0:
        raise ValueError(f"{origin}: a limit cannot be negative, got {text!r}")
    return value


def _from_environment() -> dict[str, int]:
    values = {}
    for part in os.environ.get(ENVIRONMENT, "").split(","):
        if not part.strip():
            continue
        name, sep, value = part.partition("=")
        name = name.strip()
        if not sep or name not in LIMITS:
            raise ValueError(f"{ENVIRONMENT}: {part.strip()!r} is not NAME=VALUE with NAME one of {', '.join(LIMITS)}")
        values[name] = _parse(value, f"{ENVIRONMENT} {name}")
    return values


def _known(name: str) -> Limit:
    if name not in LIMITS:
        raise ValueError(f"unknown limit {name!r}: the limits are {', '.join(LIMITS)}")
    return LIMITS[name]


def get(name: str) -> int:
    """The value of limit ``name`` now: set() / raised() first, then $ARRAYIO_LIMITS, then the default."""
    limit = _known(name)
    with _lock:
        if name in _set:
            return _set[name]
    return _from_environment().get(name, limit.default)


def set(**values: int) -> None:  # noqa: A001 - the verb users look for; shadows the builtin only here
    """Set limits process-wide (``set(chunk_bytes=1 << 30)``); a value of None restores the default."""
    for name in values:
        _known(name)
    with _lock:
        for name, value in values.items():
            if value is None:
                _set.pop(name, None)
            else:
                _set[name] = int(value)


@contextlib.contextmanager
def raised(**values: int) -> Iterator[None]:
    """Within this block the named limits have these values (process-wide; restored on exit)."""
    for name in values:
        _known(name)
    with _lock:
        before = {name: _set.get(name) for name in values}
        _set.update({name: int(value) for name, value in values.items()})
    try:
        yield
    finally:
        with _lock:
            for name, value in before.items():
                if value is None:
                    _set.pop(name, None)
                else:
                    _set[name] = value


def check(name: str, size: int, what: str, *, format: str | None = None, offset: int | None = None,
          error: type[LimitError] = LimitError) -> None:
    """Raise ``error`` (a LimitError) when ``size`` (of ``what``, as the data declares it) is over limit ``name``."""
    value = get(name)
    if size > value:
        raise error(name, value, size, what, format=format, offset=offset, unit=LIMITS[name].unit)
