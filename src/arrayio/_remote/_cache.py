"""The bounded caches of remote objects' fetched byte ranges: each object's own, and all of them together.

Each object's cache holds at most its ``capacity``. Where the ``remote_cache_bytes`` limit is set
(``arrayio.limits``; off by default), every cache of the process together holds at most that, the least
recently used extent of any of them dropped first: a process reading many remote files (a DataLoader worker
over hundreds of shards) otherwise keeps up to ``capacity`` of each. One lock guards every cache, because
making room in one drops extents of another.
"""

from __future__ import annotations

import bisect
import os
import threading
import weakref
from collections import OrderedDict

from .. import limits

# Fetched bytes: a transport's answer, or one buffer that parts of a big read were written into.
Fetched = bytes | bytearray | memoryview


class _Budget:
    """The extents of every cache of this process in least recently used order, and their bytes together."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.held = 0
        self._order: OrderedDict[tuple[int, int], None] = OrderedDict()  # (cache id, start), oldest first
        self._sizes: dict[int, dict[int, int]] = {}  # cache id -> {start: bytes}
        self._caches: dict[int, weakref.ref[_BlockCache]] = {}

    @staticmethod
    def limit() -> int:
        """The bytes all caches may hold together now."""
        return limits.get("remote_cache_bytes")

    def join(self, cache: _BlockCache) -> None:
        """Count ``cache``'s extents from now on; they stop counting when it is collected."""
        self._sizes[id(cache)] = {}
        self._caches[id(cache)] = weakref.ref(cache)
        weakref.finalize(cache, self._forget, id(cache))

    def touch(self, cache: _BlockCache, start: int) -> None:
        """Mark the extent at ``start`` of ``cache`` used now."""
        self._order.move_to_end((id(cache), start))

    def added(self, cache: _BlockCache, start: int, size: int) -> None:
        """Count a new extent, then drop the least recently used ones anywhere while all hold too much."""
        self._order[(id(cache), start)] = None
        self._sizes[id(cache)][start] = size
        self.held += size
        limit = self.limit()
        while self.held > limit and len(self._order) > 1:
            owner_id, oldest = next(iter(self._order))
            held_by = self._caches[owner_id]()
            if held_by is None:  # collected, its finalizer not yet run
                self._forget(owner_id)
            else:
                held_by._drop(oldest)

    def dropped(self, cache: _BlockCache, start: int) -> None:
        """Stop counting the extent at ``start`` of ``cache``."""
        del self._order[(id(cache), start)]
        self.held -= self._sizes[id(cache)].pop(start)

    def _forget(self, cache_id: int) -> None:
        with self.lock:
            self._caches.pop(cache_id, None)
            for start, size in self._sizes.pop(cache_id, {}).items():
                self._order.pop((cache_id, start), None)
                self.held -= size

    def after_fork(self) -> None:
        """(In a forked child) a lock of its own: another thread of the parent may have held it at the fork."""
        self.lock = threading.RLock()


_BUDGET = _Budget()
os.register_at_fork(after_in_child=_BUDGET.after_fork)


class _BlockCache:
    """Fetched extents (start -> bytes), least recently used dropped first once over ``capacity`` bytes, or
    once every cache of the process holds more than ``remote_cache_bytes`` together."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0
        self._extents: OrderedDict[int, Fetched] = OrderedDict()
        self._starts: list[int] = []
        with _BUDGET.lock:
            _BUDGET.join(self)

    @property
    def room(self) -> int:
        """The most this cache can hold now: its capacity, or all caches' limit where that is lower."""
        return min(self.capacity, _BUDGET.limit())

    def _containing(self, offset: int) -> tuple[int, Fetched] | None:
        index = bisect.bisect_right(self._starts, offset) - 1
        # Extents may overlap, so a few earlier ones can also hold the offset.
        for position in range(index, max(index - 4, -1), -1):
            start = self._starts[position]
            data = self._extents[start]
            if start <= offset < start + len(data):
                self._extents.move_to_end(start)
                _BUDGET.touch(self, start)
                return start, data
        return None

    def lookup(self, offset: int, length: int) -> tuple[memoryview, int]:
        """The cached bytes from ``offset`` on (at most ``length``) and how many there are."""
        with _BUDGET.lock:
            found = self._containing(offset)
        if found is None:
            return memoryview(b""), 0
        start, data = found
        view = memoryview(data)[offset - start:offset - start + length]
        return view, len(view)

    def covers(self, offset: int, length: int) -> bool:
        """True when one extent holds all of ``[offset, offset + length)``."""
        return self.lookup(offset, length)[1] == length

    def add(self, start: int, data: Fetched) -> None:
        """Keep ``data`` fetched at ``start`` (not when it alone exceeds the room, nor when one extent holds
        it already), dropping the extents it holds: a lookup looks at the extent starting nearest below an
        offset and a few before it, so extents inside a larger one hid it (its bytes fetched again)."""
        size = len(data)
        with _BUDGET.lock:
            if size > self.room or not size or self.covers(start, size):
                return
            stop = start + size
            starts = self._starts[bisect.bisect_left(self._starts, start):bisect.bisect_left(self._starts, stop)]
            for inside in [held for held in starts if held + len(self._extents[held]) <= stop]:
                self._drop(inside)
            self._extents[start] = data
            bisect.insort(self._starts, start)
            self.held += size
            while self.held > self.capacity:
                self._drop(next(iter(self._extents)))
            _BUDGET.added(self, start, size)

    def _drop(self, start: int) -> None:
        data = self._extents.pop(start)
        del self._starts[bisect.bisect_left(self._starts, start)]
        self.held -= len(data)
        _BUDGET.dropped(self, start)

    def clear(self) -> None:
        """Forget everything."""
        with _BUDGET.lock:
            for start in list(self._extents):
                self._drop(start)
