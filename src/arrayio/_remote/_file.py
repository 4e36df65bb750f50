"""One remote object read in byte ranges (``RemoteFile``) and the shared ``Source`` over it.

``RemoteFile`` checks every response against the size and ETag learned from
the first one; small reads fetch a read-ahead block, adjacent prefetched
ranges go out as one request, and what was fetched sits in a bounded cache.
``RemoteSource`` is the shared ``Source`` over it, so format readers never
learn where their bytes come from.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, BinaryIO

from .._binary import Source
from ..errors import ErrorKinds, ObjectChangedError
from ._cache import _BlockCache
from ._transports import _fsspec_file, _open_file, _transport

DEFAULT_READAHEAD = 64 << 10
DEFAULT_CACHE_BYTES = 32 << 20


@dataclass
class SourceStats:
    """What reading a remote object has cost so far: requests sent and body bytes received."""

    requests: int = 0
    bytes_fetched: int = 0

    def reset(self) -> None:
        """Start counting again from zero."""
        self.requests = 0
        self.bytes_fetched = 0



class RemoteFile:
    """One remote object read in byte ranges through fsspec, with a bounded cache and request counts.

    ``target`` is a URL (with ``storage_options`` for its filesystem) or an
    open fsspec file. Nothing is sent until the first read; that request
    fetches ``readahead`` bytes from the start and learns the object's size
    and ETag, and every later response must agree with them.
    """

    def __init__(self, target: Any, storage_options: dict | None = None, *,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, readahead: int = DEFAULT_READAHEAD,
                 size: int | None = None, etag: str | None = None) -> None:
        import fsspec

        self.storage_options = dict(storage_options or {})
        if _open_file(target):
            fs, path = target.fs, target.path
            self.url = target.full_name if hasattr(target, "full_name") else path
        elif _fsspec_file(target):
            fs, path = target.fs, target.path
            self.url = fs.unstrip_protocol(path) if hasattr(fs, "unstrip_protocol") else str(path)
            details = getattr(target, "details", None) or {}
            size = size if size is not None else getattr(target, "size", None)
            etag = etag or details.get("ETag") or details.get("etag")
        elif isinstance(target, str):  # a URL: resolve() decided that
            fs, path = fsspec.core.url_to_fs(target, **self.storage_options)
            self.url = target
        else:
            raise TypeError(f"expected a URL or an fsspec file, got {type(target).__name__}")
        self.fs = fs
        self.path = path
        self.readahead = int(readahead)
        self.stats = SourceStats()
        self._transport = _transport(fs, path, self.url)
        self._cache = _BlockCache(int(cache_bytes))
        self._lock = threading.Lock()
        self._size = None if size is None else int(size)
        self._etag = etag

    def __repr__(self) -> str:
        return f"RemoteFile({self.url!r})"

    @property
    def name(self) -> str:
        """The URL, for messages."""
        return self.url

    @property
    def size(self) -> int:
        """The object's size in bytes (the first read learns it)."""
        if self._size is None:
            if self._transport.size_from_first_response:
                data = self._request(0, max(self.readahead, 1))
                with self._lock:
                    self._cache.add(0, data)
            else:
                with self._lock:
                    self.stats.requests += 1
                response = self._transport.stat()
                self._size, self._etag = response.size, response.etag
        return self._size  # type: ignore[return-value]

    @property
    def etag(self) -> str | None:
        """The ETag the backend reported when the object was opened (None when it reports none)."""
        self.size  # noqa: B018 - opening learns it
        return self._etag

    @property
    def cache_bytes(self) -> int:
        """The cache's bound in bytes."""
        return self._cache.capacity

    def _request(self, start: int, stop: int) -> bytes:
        """One request for ``[start, stop)``, checked against what the object was at open."""
        with self._lock:
            self.stats.requests += 1
        response = self._transport.get(start, stop)
        with self._lock:
            self.stats.bytes_fetched += len(response.data)
        if self._size is None:
            self._size = response.size if response.size is not None else len(response.data)
            self._etag = response.etag
        else:
            changed = []
            if response.size is not None and response.size != self._size:
                changed.append(f"size {self._size} -> {response.size}")
            if self._etag and response.etag and response.etag != self._etag:
                changed.append(f"ETag {self._etag} -> {response.etag}")
            if changed:
                raise ObjectChangedError(f"{self.url}: the object changed after it was opened "
                                         f"({', '.join(changed)}); reopen it to read the new version")
        wanted = max(0, min(stop, self._size) - start)
        if len(response.data) < wanted:
            raise ObjectChangedError(f"{self.url}: asked for bytes {start}..{start + wanted}, received "
                                     f"{len(response.data)} (the object is shorter than when it was opened)")
        return response.data[:wanted] if len(response.data) > wanted else response.data

    def read(self, offset: int, length: int) -> memoryview:
        """``length`` bytes at ``offset`` (the caller checked the range against ``size``).

        A cached prefix is reused and only the rest fetched; a read shorter
        than the read-ahead fetches a read-ahead block, so the small reads
        of a header or an index that follow are answered from the cache.
        """
        if length <= 0:
            return memoryview(b"")
        size = self.size
        with self._lock:
            cached, count = self._cache.lookup(offset, length)
            if count == length:
                return cached
            prefix = bytes(cached)
        start = offset + count
        stop = offset + length
        if length < self.readahead:
            stop = min(size, max(stop, offset + self.readahead))
        data = self._request(start, stop)
        if prefix:
            data = prefix + data
        with self._lock:
            self._cache.add(offset, data)
        return memoryview(data)[:length]

    def prefetch(self, ranges: Iterable[tuple[int, int]], gap: int = 0) -> None:
        """Fetch ``(offset, length)`` ranges into the cache, ranges at most ``gap`` apart joined into one request."""
        spans = sorted((offset, offset + length) for offset, length in ranges if length > 0)
        merged: list[list[int]] = []
        for start, stop in spans:
            if merged and start <= merged[-1][1] + gap:
                merged[-1][1] = max(merged[-1][1], stop)
            else:
                merged.append([start, stop])
        size = self.size
        step = max(1, self._cache.capacity // 2)
        # More than half the cache would evict itself before it is read: the rest is read on demand.
        budget = step
        for start, stop in merged:
            stop = min(stop, start + budget)
            budget -= max(0, stop - start)
            if stop <= start:
                break
            stop = min(stop, size)
            for piece in range(start, stop, step):
                end = min(stop, piece + step)
                with self._lock:
                    if self._cache.covers(piece, end - piece):
                        continue
                data = self._request(piece, end)
                with self._lock:
                    self._cache.add(piece, data)

    def open(self) -> BinaryIO:
        """A seekable binary file object reading through this object's cache (for stream-based readers)."""
        return io.BufferedReader(_RemoteReader(self), buffer_size=self.readahead)

    def release(self) -> None:
        """Drop the cached bytes (the object stays readable; later reads fetch again)."""
        with self._lock:
            self._cache.clear()


class _RemoteReader(io.RawIOBase):
    """A RemoteFile as a raw, seekable, read-only stream."""

    def __init__(self, remote: RemoteFile) -> None:
        self.remote = remote
        self.name = remote.name
        self.position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.remote.size}[whence]
        self.position = max(0, base + offset)
        return self.position

    def readinto(self, buffer: Any) -> int:
        view = memoryview(buffer).cast("B")
        count = max(0, min(len(view), self.remote.size - self.position))
        view[:count] = self.remote.read(self.position, count)
        self.position += count
        return count


class RemoteSource(Source):
    """The shared ``Source`` over a RemoteFile: bounds-checked views fetched in ranges."""

    def __init__(self, remote: RemoteFile, errors: ErrorKinds, *, owns: bool = False) -> None:
        super().__init__(None, errors, name=remote.name, size=remote.size)
        self.remote = remote
        self._owns = owns

    @property
    def stats(self) -> SourceStats:
        """Requests sent and bytes received for this object."""
        return self.remote.stats

    def check(self, offset: int, length: int, what: str) -> None:
        """Like Source.check; a range past the end names the URL."""
        if 0 <= offset and 0 <= length and offset + length > self.size:
            raise self.errors.truncated_at(f"{what} of {self.name}", offset, length, self.size)
        super().check(offset, length, what)

    def view(self, offset: int, length: int, what: str) -> memoryview:
        """``length`` bytes at ``offset``, fetched (or from the cache), bounds-checked."""
        self.check(offset, length, what)
        if self.closed:
            raise ValueError("I/O operation on a closed source")
        return self.remote.read(offset, length)

    def prefetch(self, ranges: Iterable[tuple[int, int]]) -> None:
        """Fetch the ``(offset, length)`` ranges about to be read, adjacent ones in one request."""
        if not self.closed:
            self.remote.prefetch(ranges)

    def close(self) -> None:
        """Mark closed; a RemoteFile this source opened itself drops its cache."""
        if not self.closed and self._owns:
            self.remote.release()
        super().close()

