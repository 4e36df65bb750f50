"""The bounded cache of a remote object's fetched byte ranges."""

from __future__ import annotations

import bisect
from collections import OrderedDict

# Fetched bytes: a transport's answer, or one buffer that parts of a big read were written into.
Fetched = bytes | bytearray | memoryview


class _BlockCache:
    """Fetched extents (start -> bytes), least recently used dropped first once over ``capacity`` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0
        self._extents: OrderedDict[int, Fetched] = OrderedDict()
        self._starts: list[int] = []

    def _containing(self, offset: int) -> tuple[int, Fetched] | None:
        index = bisect.bisect_right(self._starts, offset) - 1
        # Extents may overlap, so a few earlier ones can also hold the offset.
        for position in range(index, max(index - 4, -1), -1):
            start = self._starts[position]
            data = self._extents[start]
            if start <= offset < start + len(data):
                self._extents.move_to_end(start)
                return start, data
        return None

    def lookup(self, offset: int, length: int) -> tuple[memoryview, int]:
        """The cached bytes from ``offset`` on (at most ``length``) and how many there are."""
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
        """Keep ``data`` fetched at ``start`` (not when it alone exceeds the capacity, nor when one extent holds
        it already), dropping the extents it holds: a lookup looks at the extent starting nearest below an
        offset and a few before it, so extents inside a larger one hid it (its bytes fetched again)."""
        size = len(data)
        if size > self.capacity or not size or self.covers(start, size):
            return
        stop = start + size
        starts = self._starts[bisect.bisect_left(self._starts, start):bisect.bisect_left(self._starts, stop)]
        for inside in [held for held in starts if held + len(self._extents[held]) <= stop]:
            self._drop(inside)
        self._extents[start] = data
        bisect.insort(self._starts, start)
        self.held += len(data)
        while self.held > self.capacity:
            self._drop(next(iter(self._extents)))

    def _drop(self, start: int) -> None:
        data = self._extents.pop(start)
        del self._starts[bisect.bisect_left(self._starts, start)]
        self.held -= len(data)

    def clear(self) -> None:
        """Forget everything."""
        self._extents.clear()
        self._starts.clear()
        self.held = 0

