"""One remote object read in byte ranges (``RemoteFile``) and the shared ``Source`` over it.

``RemoteFile`` checks every response against the size and ETag learned from
the first one; small reads fetch a read-ahead block, adjacent prefetched
ranges go out as one request, and what was fetched sits in a bounded cache.
``RemoteSource`` is the shared ``Source`` over it, so format readers never
learn where their bytes come from.
"""

from __future__ import annotations

import bisect
import io
import itertools
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np

from .._binary import Source
from .._optional import require
from ..errors import ErrorKinds, FormatError, ObjectChangedError, UnsupportedError
from . import _byteranges as byteranges
from ._cache import Fetched, _BlockCache
from ._http import _HTTPTransport, _origin
from ._obstore import forked, obstore_transport
from ._settings import checked_options, split_options
from ._shared import SharedRanges
from ._transports import _fsspec_file, _FsspecTransport, _GCSTransport, _open_file, _S3Transport

DEFAULT_READAHEAD = 64 << 10
DEFAULT_CACHE_BYTES = 32 << 20
# Ranges of one batch (fetch_ranges, prefetch) at most this far apart go out as one request.
COALESCE_GAP = 64 << 10
# Origins whose servers answered several ranges with the whole object: asked one range a request from then on.
_SINGLE_RANGE_ORIGINS: set[tuple[str, str, int | None]] = set()
# Schemes whose ETag both clients report alike (the response's ETag header, quotes and all).
_SAME_ETAGS = frozenset({"s3", "s3a", "http", "https"})
# Announced spans remembered for windowed fetching (the latest ones).
_PLANNED_SPANS = 16


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
    """One remote object read in byte ranges, with a bounded cache and request counts.

    ``target`` is a URL (with ``storage_options`` for its backend) or an
    open fsspec file. ``s3://``, ``gs://``, ``az://`` and ``http(s)://`` URLs
    go through obstore when it is installed and the options map to it, every
    other target through fsspec (``storage_options={"client": ...}`` chooses;
    ``self.client`` says which). Nothing is sent until the first read; that
    request fetches ``readahead`` bytes from the start and learns the
    object's size and ETag, and every later response must agree with them.
    Reads above ``part_bytes`` go out as ranged GETs of that size,
    ``concurrency`` at a time (both ``storage_options`` keys). ``size`` and
    ``etag`` given (as ``etag_client`` reported it) spare that first request;
    an ETag another client reports in another form (GCS, Azure) is not kept.
    """

    def __init__(self, target: Any, storage_options: dict | None = None, *,
                 cache_bytes: int = DEFAULT_CACHE_BYTES, readahead: int = DEFAULT_READAHEAD,
                 size: int | None = None, etag: str | None = None, etag_client: str | None = None) -> None:
        self.storage_options = checked_options(storage_options)
        self.settings, self._backend_options = split_options(self.storage_options)
        self._fs: Any = None
        self._path = ""
        transport: Any = None
        if _open_file(target) or _fsspec_file(target):
            if self.settings.client == "obstore":
                raise UnsupportedError("an open fsspec file is read through its own filesystem, not obstore")
            self._fs, self._path = target.fs, target.path
            if _open_file(target):
                self.url = target.full_name if hasattr(target, "full_name") else target.path
            else:
                fs = target.fs
                self.url = fs.unstrip_protocol(target.path) if hasattr(fs, "unstrip_protocol") else str(target.path)
                details = getattr(target, "details", None) or {}
                size = size if size is not None else getattr(target, "size", None)
                etag = etag or details.get("ETag") or details.get("etag")
        elif isinstance(target, str):  # a URL: resolve() decided that
            self.url = target
            transport = obstore_transport(target, self._backend_options, self.settings)
        else:
            raise TypeError(f"expected a URL or an fsspec file, got {type(target).__name__}")
        self.client = "obstore" if transport is not None else "fsspec"
        if etag_client not in (None, self.client) and self.url.partition("://")[0].lower() not in _SAME_ETAGS:
            etag = None
        self.readahead = int(readahead)
        self.stats = SourceStats()
        self._transport = transport if transport is not None else self._fsspec_transport()
        self._cache = _BlockCache(int(cache_bytes))
        self._planned: list[tuple[int, int]] = []  # prefetched spans larger than the cache's window
        self._lock = threading.Lock()
        self._size = None if size is None else int(size)
        self._etag = etag
        self._several_ranges: _HTTPTransport | None = None
        self._shared: SharedRanges | None = None

    def _fsspec_transport(self) -> Any:
        fs, path = self.fs, self.path
        protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
        if protocols & {"http", "https"}:
            return _HTTPTransport(fs, path, self.settings)
        if protocols & {"s3", "s3a"} and hasattr(fs, "_call_s3"):
            return _S3Transport(fs, path, self.url)
        if protocols & {"gs", "gcs"} and hasattr(fs, "_call") and hasattr(fs, "url"):
            return _GCSTransport(fs, path, self.url)
        return _FsspecTransport(fs, path, self.url)

    def _filesystem(self) -> None:
        fsspec = require("fsspec", "reading URLs")
        options = dict(self._backend_options)
        if self.url.partition("://")[0].lower() in ("s3", "s3a"):  # botocore's own timeouts, when not given
            config = dict(options.get("config_kwargs") or {})
            config.setdefault("connect_timeout", self.settings.connect_timeout)
            config.setdefault("read_timeout", self.settings.read_timeout)
            options["config_kwargs"] = config
        self._fs, self._path = fsspec.core.url_to_fs(self.url, **options)

    @property
    def fs(self) -> Any:
        """The object's fsspec filesystem (made on first use: the obstore transport needs none)."""
        if self._fs is None:
            self._filesystem()
        return self._fs

    @property
    def path(self) -> str:
        """The object's path in its fsspec filesystem."""
        if self._fs is None:
            self._filesystem()
        return self._path

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
                if self.settings.shared_cache is not None:  # the start other processes open the object with
                    self._shared_ranges().offer(0, data)
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

    def _request(self, start: int, stop: int, head: bytes = b"") -> Fetched:
        """``head`` followed by ``[start, stop)``: one request, or parts of ``part_bytes`` fetched concurrently
        into one buffer (which ``head``, bytes already at hand, starts)."""
        part = self.settings.part_bytes
        if stop - start <= part or self._size is None:
            data = self._request_one(start, stop)
            data = bytes(data) if isinstance(data, memoryview) else data  # a view only when given a buffer
            return head + data if head else data
        stop = min(stop, self._size)
        # Not zeroed (bytearray would memset it, one thread, as long as the fetch of 1 GiB on loopback): every
        # byte is written by a part, and its pages fault in inside the parts' threads, in parallel.
        whole = np.empty(len(head) + max(0, stop - start), np.uint8)
        whole[:len(head)] = np.frombuffer(head, np.uint8)
        buffer = whole.data  # a memoryview of the array
        self._fill(start, buffer[len(head):])
        return buffer

    def _fill(self, start: int, view: memoryview, concurrency: int | None = None) -> None:
        """Bytes ``start..start + len(view)`` written into ``view`` by ranged GETs of ``part_bytes``,
        ``concurrency`` at a time: a transport that reads into a buffer writes each part in place; otherwise
        numpy copies it there (outside the GIL, so the parts land in parallel too)."""
        part = self.settings.part_bytes
        stop = start + len(view)
        target = np.frombuffer(view, np.uint8)

        def fetch(piece: int) -> None:
            end = min(stop, piece + part)
            slot = view[piece - start:end - start]
            data = self._request_one(piece, end, into=slot)
            if data is not slot:
                target[piece - start:end - start] = np.frombuffer(data, np.uint8)

        _concurrently(fetch, range(start, stop, part), concurrency or self.settings.concurrency)

    def read_into(self, buffer: Any, offset: int = 0, *, concurrency: int | None = None) -> None:
        """Fill the writable ``buffer`` (an mmap, a bytearray) with the object's bytes from ``offset``, in
        parallel parts written in place (``concurrency`` at a time, else the storage option's): a whole
        object into memory the caller owns, without a copy."""
        view = memoryview(buffer).cast("B")
        if offset < 0 or offset + len(view) > self.size:
            raise ValueError(f"{self.url}: bytes {offset}..{offset + len(view)} are not inside its {self.size}")
        self._fill(offset, view, concurrency)

    def _request_one(self, start: int, stop: int, into: memoryview | None = None) -> Fetched:
        """One request for ``[start, stop)``, checked against what the object was at open (written into
        ``into``, and returned as it, where the transport can)."""
        with self._lock:
            self.stats.requests += 1
            if self.client == "obstore" and forked():
                # Inherited across a fork: obstore would hang here, fsspec reads on. The two report versions
                # differently (GCS: ETag against generation), so only the size is checked from now on.
                self._transport, self.client, self._etag = self._fsspec_transport(), "fsspec", None
        if into is not None and getattr(self._transport, "reads_into", False):
            response = self._transport.get(start, stop, into)
        else:
            response = self._transport.get(start, stop)
        with self._lock:
            self.stats.bytes_fetched += len(response.data)
            if self._size is None:
                self._size = response.size if response.size is not None else len(response.data)
                self._etag = response.etag
            elif self._etag is None:  # opened with a size only (or after a change of client): checked from here on
                self._etag = response.etag
        self._check_version(response.size, response.etag)
        wanted = max(0, min(stop, self._size) - start)
        if len(response.data) < wanted:
            raise ObjectChangedError(f"{self.url}: asked for bytes {start}..{start + wanted}, received "
                                     f"{len(response.data)} (the object is shorter than when it was opened)")
        return response.data[:wanted] if len(response.data) > wanted else response.data

    def _check_version(self, size: int | None, etag: str | None) -> None:
        """Raise ObjectChangedError when a response names another size or ETag than the object had at open."""
        changed = []
        if size is not None and size != self._size:
            changed.append(f"size {self._size} -> {size}")
        if self._etag and etag and etag != self._etag:
            changed.append(f"ETag {self._etag} -> {etag}")
        if changed:
            raise ObjectChangedError(f"{self.url}: the object changed after it was opened "
                                     f"({', '.join(changed)}); reopen it to read the new version")

    def _byteranges_transport(self) -> _HTTPTransport | None:
        """The transport that asks for several ranges in one GET (an HTTP server's), else None: obstore sends
        one range per request, so over HTTP(S) its reads of several ranges go through the HTTP transport."""
        if isinstance(self._transport, _HTTPTransport):
            return self._transport
        if self.client != "obstore" or self.url.partition("://")[0].lower() not in ("http", "https"):
            return None
        with self._lock:
            if self._several_ranges is None:
                self._several_ranges = _HTTPTransport(self.fs, self.path, self.settings)
            return self._several_ranges

    def _fetch_together(self, pieces: list[tuple[int, int]]) -> list[tuple[int, int]]:
        """Fetch ``(start, stop)`` pieces into the cache in several-range GETs where the server answers them
        (MAX_RANGES a request: the first alone, which tells, the others concurrently); the pieces still
        missing (all of them where it cannot) are returned."""
        origin = _origin(self.url)
        if len(pieces) < 2 or origin in _SINGLE_RANGE_ORIGINS:
            return pieces
        transport = self._byteranges_transport()
        if transport is None:
            return pieces
        step = byteranges.MAX_RANGES
        batches = [pieces[first:first + step] for first in range(0, len(pieces), step)]
        missing = self._fetch_ranges(transport, batches[0])
        if missing is None:  # the server sends whole objects to several ranges: ask one range a request
            _SINGLE_RANGE_ORIGINS.add(origin)
            return pieces

        def fetch(batch: list[tuple[int, int]]) -> None:
            left = self._fetch_ranges(transport, batch)
            with self._lock:
                missing.extend(batch if left is None else left)

        _concurrently(fetch, batches[1:], self.settings.concurrency)
        return missing

    def _fetch_ranges(self, transport: _HTTPTransport, batch: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
        """One several-range GET of ``batch`` into the cache: the pieces it did not answer, or None where the
        server sent the whole object instead."""
        with self._lock:
            self.stats.requests += 1
        answer = transport.get_ranges(batch)
        if answer is None:
            return None
        self._check_version(answer.size, answer.etag)
        with self._lock:
            for start, data in answer.parts:
                self.stats.bytes_fetched += len(data)
                if start + len(data) <= self.size:
                    self._cache.add(start, bytes(data))
            return [(start, stop) for start, stop in batch if not self._cache.covers(start, stop - start)]

    def read(self, offset: int, length: int) -> memoryview:
        """``length`` bytes at ``offset`` (the caller checked the range against ``size``), read-only.

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
                return cached.toreadonly()
            prefix = bytes(cached)
        start = offset + count
        stop = offset + length
        if length < self.readahead:
            stop = min(size, max(stop, offset + self.readahead))
        # Inside a span announced by prefetch that the cache could not take at once: fetch its next window.
        stop = max(stop, min(self._planned_end(start), start + self._window, size))
        if self.settings.shared_cache is None:
            data = self._request(start, stop, head=prefix)
        else:
            data = self._through_folder(start, stop)
            data = b"".join((prefix, data)) if prefix else data  # one copy, not two
        with self._lock:
            self._cache.add(offset, data)
        return memoryview(data)[:length].toreadonly()

    def read_each(self, ranges: Sequence[tuple[int, int]]) -> list[memoryview]:
        """``read`` of each ``(offset, length)`` range (checked by the caller), in order: the cached ones
        looked up under one lock, the others prefetched together (concurrently) and then read."""
        found: list[memoryview | None] = []
        with self._lock:
            for offset, length in ranges:
                cached, count = self._cache.lookup(offset, length)
                found.append(cached.toreadonly() if count == length else None)
        missing = [ranges[place] for place, view in enumerate(found) if view is None]
        if len(missing) > 1:
            self.prefetch(missing)
        return [self.read(offset, length) if view is None else view for view, (offset, length) in zip(found, ranges)]

    def read_many(self, ranges: Sequence[tuple[int, int]], gap: int = COALESCE_GAP) -> list[memoryview]:
        """The bytes of many ``(offset, length)`` ranges, read-only, in the order given: ranges at most ``gap``
        apart fetched as one request, the requests sent concurrently (``concurrency`` at a time), nothing cached."""
        spans = _coalesce(ranges, gap)
        size = self.size
        fetched: dict[int, Fetched] = {}

        def fetch(span: tuple[int, int]) -> None:
            start, stop = span
            with self._lock:
                cached, count = self._cache.lookup(start, stop - start)
            fetched[start] = bytes(cached) if count == stop - start else self._request(start, min(stop, size))

        _concurrently(fetch, spans, self.settings.concurrency)
        starts = [start for start, _stop in spans]
        views = []
        for offset, length in ranges:
            if length <= 0:
                views.append(memoryview(b""))
                continue
            start = starts[bisect.bisect_right(starts, offset) - 1]
            views.append(memoryview(fetched[start])[offset - start:offset - start + length].toreadonly())
        return views

    def prefetch(self, ranges: Iterable[tuple[int, int]], gap: int = 0, *, together: bool = False) -> None:
        """Fetch ``(offset, length)`` ranges into the cache: ranges at most ``gap`` apart joined into one
        request, the requests sent concurrently, at most half the cache in all (more would evict itself before
        it is read); a span past that is remembered, and each read that reaches it fetches its next window.
        ``together``: small ranges scattered over the object, asked in one several-range GET where the server
        answers those (HTTP), so they cost one round trip, not one each."""
        size = self.size
        with self._lock:  # the ranges the cache holds already: nothing to do (a batch's usual case)
            ranges = [(offset, length) for offset, length in ranges
                      if not self._cache.covers(offset, max(0, min(length, size - offset)))]
        if ranges and self.settings.shared_cache is not None and not together:
            self._prefetch_shared(ranges, gap)
            with self._lock:  # what it left uncached is fetched below (it caches range by range, not joined)
                ranges = [(offset, length) for offset, length in ranges
                          if not self._cache.covers(offset, max(0, min(length, size - offset)))]
        step = self._window
        budget = step
        pieces = []
        for start, stop in _coalesce(ranges, gap):
            stop = min(stop, size)
            if stop - start > budget:  # the rest is fetched a window at a time as the reads reach it
                with self._lock:
                    self._planned.append((start + max(0, budget), stop))
                    del self._planned[:-_PLANNED_SPANS]
            stop = min(stop, start + budget)
            budget -= max(0, stop - start)
            if stop <= start:
                continue
            for piece in range(start, stop, step):
                end = min(stop, piece + step)
                with self._lock:
                    if not self._cache.covers(piece, end - piece):
                        pieces.append((piece, end))

        def fetch(piece: tuple[int, int]) -> None:
            data = self._request(*piece)
            with self._lock:
                self._cache.add(piece[0], data)

        _concurrently(fetch, self._fetch_together(pieces) if together else pieces, self.settings.concurrency)

    def _prefetch_shared(self, ranges: list[tuple[int, int]], gap: int) -> None:
        """Put the ``(offset, length)`` ranges (those that fit the prefetch window) in the cache through the
        shared folder: each one another process published is mapped from it; those this process claims
        are fetched (neighbours ``gap`` apart in one request) and published; those another process is
        fetching are waited for. A range it gave up on, or took too long for, is left to the caller."""
        shared = self._shared_ranges()
        budget = self._window
        wanted = []
        with self._lock:
            for offset, length in sorted(ranges):
                stop = min(offset + length, self._size or 0)
                if stop <= offset or stop - offset > budget or self._cache.covers(offset, stop - offset):
                    continue
                budget -= stop - offset
                wanted.append((offset, stop))
        claimed: list[tuple[int, int, Any]] = []
        waiting = []
        # Processes that want the same ranges at once claim them from opposite ends (by pid parity, as a
        # DataLoader's workers are forked one after another): each gets a run of neighbours, fetched in one
        # request, where claiming in one order would alternate them and cost a request a range.
        for start, stop in wanted[::-1] if os.getpid() % 2 else wanted:
            data = shared.load(start, stop)
            claim = None if data is not None else shared.claim(start, stop)
            if data is not None:
                with self._lock:
                    self._cache.add(start, data)
            elif claim is not None:
                claimed.append((start, stop, claim))
            else:
                waiting.append((start, stop))
        runs: list[list[tuple[int, int, Any]]] = []
        for piece in sorted(claimed, key=lambda piece: piece[0]):  # neighbours a gap apart: one request
            if runs and piece[0] <= runs[-1][-1][1] + gap:
                runs[-1].append(piece)
            else:
                runs.append([piece])

        def fetch(run: list[tuple[int, int, Any]]) -> None:
            first = run[0][0]
            data = memoryview(self._request(first, run[-1][1]))
            for start, stop, claim in run:
                piece = data[start - first:stop - first]
                shared.publish(claim, piece)
                with self._lock:
                    self._cache.add(start, piece)

        try:
            _concurrently(fetch, runs, self.settings.concurrency)
        finally:
            for _start, _stop, claim in claimed:
                shared.abandon(claim)  # those left unpublished by a failed fetch
        for start, stop in waiting:
            data = shared.wait(start, stop, self._patience)
            if data is not None:
                with self._lock:
                    self._cache.add(start, data)

    def _through_folder(self, start: int, stop: int) -> Fetched:
        """``[start, stop)`` by way of the shared folder: as another process published it; else fetched here
        and published; else (another process is fetching it) waited for, and fetched here if it gave up."""
        shared = self._shared_ranges()
        data = shared.load(start, stop)
        if data is not None:
            return data
        claim = shared.claim(start, stop)
        if claim is None:
            return shared.wait(start, stop, self._patience) or self._request(start, stop)
        try:
            data = self._request(start, stop)
            shared.publish(claim, data)
        finally:
            shared.abandon(claim)
        return data

    @property
    def _patience(self) -> float:
        """How long to wait for a range another process fetches: as long as that fetch may take."""
        return self.settings.timeout or self.settings.read_timeout

    def _shared_ranges(self) -> SharedRanges:
        """The shared folder's view of this object's version (known once it was opened)."""
        if self._shared is None:
            self._shared = SharedRanges(str(self.settings.shared_cache), f"{self.url}\0{self._size}\0{self._etag}",
                                        int(self.settings.shared_cache_bytes))
        return self._shared

    def iter_ranges(self, ranges: Iterable[tuple[int, int]], *, part: int = 8 << 20,
                    threads: int = 8) -> Iterator[tuple[int, Fetched]]:
        """(offset, bytes) of the ``(offset, length)`` ranges in parts of at most ``part`` bytes, in order,
        fetched ``threads`` parts at a time (at most that many parts in memory); nothing goes through the
        cache, so a whole object can stream through without a second copy or a temporary file."""
        size = self.size
        pieces = iter([(start, min(start + part, offset + length, size))
                       for offset, length in ranges if length > 0
                       for start in range(offset, min(offset + length, size), part)])
        with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
            pending = deque((start, pool.submit(self._request, start, stop))
                            for start, stop in itertools.islice(pieces, max(1, threads)))
            while pending:
                start, future = pending.popleft()
                following = next(pieces, None)
                if following is not None:
                    pending.append((following[0], pool.submit(self._request, *following)))
                yield start, future.result()

    @property
    def _window(self) -> int:
        """The most a prefetch (or one window of a planned span) puts in the cache at once: half of it."""
        return max(1, self._cache.room // 2)

    def _planned_end(self, offset: int) -> int:
        """The end of the span announced by prefetch that holds ``offset`` (0 when none does)."""
        with self._lock:
            for start, stop in reversed(self._planned):
                if start <= offset < stop:
                    return stop
        return 0

    def open(self) -> BinaryIO:
        """A seekable binary file object reading through this object's cache (for stream-based readers)."""
        return io.BufferedReader(_RemoteReader(self), buffer_size=self.readahead)

    def release(self) -> None:
        """Drop the cached bytes (the object stays readable; later reads fetch again)."""
        with self._lock:
            self._cache.clear()
            self._planned.clear()


def _coalesce(ranges: Iterable[tuple[int, int]], gap: int) -> list[tuple[int, int]]:
    """Sorted ``(start, stop)`` spans covering the ``(offset, length)`` ranges, those ``gap`` apart joined."""
    merged: list[list[int]] = []
    for start, stop in sorted((offset, offset + length) for offset, length in ranges if length > 0):
        if merged and start <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return [(start, stop) for start, stop in merged]


def _concurrently(call: Callable[[Any], None], items: Iterable[Any], concurrency: int) -> None:
    """``call(item)`` for every item, ``concurrency`` at a time; the first error is raised."""
    items = list(items)
    if len(items) <= 1 or concurrency <= 1:
        for item in items:
            call(item)
        return
    with ThreadPoolExecutor(min(concurrency, len(items)), thread_name_prefix="arrayio-fetch") as pool:
        for future in [pool.submit(call, item) for item in items]:
            future.result()


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

    @property
    def version(self) -> tuple[int, str | None, str]:
        """(size, ETag, client) of the object as it was opened."""
        return self.remote.size, self.remote.etag, self.remote.client

    def check(self, offset: int, length: int, what: str) -> None:
        """Like Source.check; the error names the URL (once: a reader that names its file finds it named)."""
        try:
            super().check(offset, length, what)
        except FormatError as error:
            raise error.naming(self.name) from None

    def view(self, offset: int, length: int, what: str) -> memoryview:
        """``length`` bytes at ``offset``, fetched (or from the cache), bounds-checked."""
        self.check(offset, length, what)
        if self.closed:
            raise ValueError("I/O operation on a closed source")
        return self.remote.read(offset, length)

    def views(self, ranges: Iterable[tuple[int, int]], what: str) -> list[memoryview]:
        """``view`` of each ``(offset, length)`` range, in order: those the cache holds looked up at once."""
        ranges = list(ranges)
        for offset, length in ranges:
            self.check(offset, length, what)
        if self.closed:
            raise ValueError("I/O operation on a closed source")
        return self.remote.read_each(ranges)

    def prefetch(self, ranges: Iterable[tuple[int, int]], gap: int = 0, *, together: bool = False) -> None:
        """Fetch the ``(offset, length)`` ranges about to be read, those at most ``gap`` apart in one request
        (``together``: all in one request where the server can, see RemoteFile.prefetch)."""
        if not self.closed:
            self.remote.prefetch(ranges, gap, together=together)

    def close(self) -> None:
        """Mark closed; a RemoteFile this source opened itself drops its cache."""
        if not self.closed and self._owns:
            self.remote.release()
        super().close()


def fetch_ranges(source: Source, ranges: Sequence[tuple[int, int]], what: str = "range") -> list[memoryview]:
    """The bytes of many ``(offset, length)`` ranges of any Source, bounds-checked, in the order given.

    A remote source joins neighbouring ranges and sends the requests
    concurrently (``RemoteFile.read_many``); a local one returns views of its
    map. What a dask task or a batch of chunks or frames calls for its bytes.
    """
    for offset, length in ranges:
        source.check(offset, length, what)
    if isinstance(source, RemoteSource):
        if source.closed:
            raise ValueError("I/O operation on a closed source")
        return source.remote.read_many(ranges)
    return [source.view(offset, length, what) for offset, length in ranges]
