"""Chunk-level parallelism: Blosc1 splits a default 1 MiB chunk into a single block, so its own
threads sit idle; we run one chunk per worker thread instead, with the GIL released inside
python-blosc (``set_releasegil``) and inside zlib/hashlib for the checksums.
"""

from __future__ import annotations

import collections
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable, Iterable, Iterator

import blosc

__all__ = ["set_nthreads", "get_nthreads", "ordered_map", "parallel_map"]

blosc.set_releasegil(True)

_state: dict[str, Any] = {"nthreads": max(1, blosc.ncores), "pool": None}


def set_nthreads(count: int) -> int:
    """Use ``count`` threads for compression and decompression; returns the previous count."""
    if not 1 <= count <= blosc.MAX_THREADS:
        raise ValueError(f"bloscpack: nthreads must be in 1..{blosc.MAX_THREADS}, found {count}")
    previous = _state["nthreads"]
    if count != previous:
        blosc.set_nthreads(count)
        pool, _state["pool"] = _state["pool"], None
        if pool is not None:
            pool.shutdown(wait=True)
        _state["nthreads"] = count
    return previous


def get_nthreads() -> int:
    """The number of threads used per compression or decompression."""
    return _state["nthreads"]


def _pool() -> ThreadPoolExecutor:
    if _state["pool"] is None:
        _state["pool"] = ThreadPoolExecutor(_state["nthreads"], thread_name_prefix="arrayio-bloscpack")
    return _state["pool"]


def ordered_map(function: Callable[[Any], Any], items: Iterable[Any], window: int | None = None,
                threads: bool = True) -> Iterator[Any]:
    """``function`` over ``items`` on the worker threads, results in order, at most ``window`` in flight.

    ``threads=False`` runs the calls here, in order (for sources that cannot be read concurrently).
    When a call fails, or the consumer stops early, the calls still running are waited for before
    control returns, so no worker outlives the buffers it writes to or reads from.
    """
    items = list(items)
    if not threads or _state["nthreads"] == 1 or len(items) < 2:
        for item in items:
            yield function(item)
        return
    window = window or 2 * _state["nthreads"]
    pool = _pool()
    pending: collections.deque[Future] = collections.deque()
    upcoming = iter(items)
    try:
        for item in upcoming:
            pending.append(pool.submit(function, item))
            if len(pending) >= window:
                break
        while pending:
            result = pending.popleft().result()
            for item in upcoming:
                pending.append(pool.submit(function, item))
                break
            yield result
    finally:
        for future in pending:
            future.cancel()
        for future in pending:
            if not future.cancelled():
                future.exception()


def parallel_map(function: Callable[[Any], None], items: Iterable[Any],
                 on_done: Callable[[Any], None] | None = None, threads: bool = True) -> None:
    """Run ``function`` on every item on the worker threads; ``on_done(item)`` follows in item order."""
    items = list(items)
    for item, _ in zip(items, ordered_map(function, items, threads=threads)):
        if on_done is not None:
            on_done(item)
