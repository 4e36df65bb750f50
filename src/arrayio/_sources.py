"""Bytes that live elsewhere: one remote Source over fsspec, and remote writes.

``RemoteFile`` is one remote object (a URL or an open fsspec file) read in
byte ranges: every response is checked against the size and ETag learned
from the first one, small reads fetch a read-ahead block, adjacent
prefetched ranges go out as one request, and what was fetched sits in a
bounded cache. ``RemoteSource`` is the shared ``Source`` over it, so format
readers never learn where their bytes come from.

HTTP(S), S3 and GCS are spoken to below fsspec's file layer: the first
request is a ranged GET whose ``Content-Range`` gives both the head bytes and
the object's size, so opening needs no HEAD. Other fsspec backends cost one
``info()`` call more.
"""

from __future__ import annotations

import abc
import bisect
import contextlib
import errno
import io
import itertools
import re
import shutil
import sys
import tempfile
import threading
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO, NamedTuple
from urllib.parse import urlsplit

from ._binary import Source, atomic_write
from ._optional import require
from .errors import ErrorKinds, ObjectChangedError, RemoteError, UnsupportedError

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "DEFAULT_READAHEAD",
    "RemoteFile",
    "RemoteSource",
    "SourceStats",
    "expand_url_pattern",
    "is_remote",
    "is_url",
    "is_url_pattern",
    "remote_output",
    "resolve",
]

DEFAULT_READAHEAD = 64 << 10
DEFAULT_CACHE_BYTES = 32 << 20
# Uploads go out in parts of this size; an object store publishes the object only when the last one lands.
UPLOAD_PART_BYTES = 16 << 20
# Object stores publish an object whole when its upload completes; elsewhere we write a temporary key and move it.
WHOLE_ON_CLOSE = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"})

# A scheme of two or more letters (so "C:\\" stays a path), then "://", or fsspec's "::" chaining
# in front of one (so a file named "a::b.kas" stays a path).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+(://|::.*://)")
_URL_GLOB_CHARACTERS = frozenset("*?[")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+://")
_CONTENT_RANGE = re.compile(r"bytes\s+(?:\d+-\d+|\*)/(\d+)")


def is_url(target: Any) -> bool:
    """True for a string that names a URL (``s3://``, ``https://``, ``simplecache::...``)."""
    return isinstance(target, str) and _URL.match(target) is not None


def _local_path(url: str) -> str | None:
    """The path of a plain ``file://`` URL (mapped like any local file), else None."""
    if url.startswith("file://") and "::" not in url:
        return url[len("file://"):]
    return None


def _fsspec_file(target: Any) -> bool:
    spec = sys.modules.get("fsspec.spec")
    return spec is not None and hasattr(target, "read") and isinstance(getattr(target, "fs", None),
                                                                       spec.AbstractFileSystem)


def _open_file(target: Any) -> bool:
    core = sys.modules.get("fsspec.core")
    return core is not None and isinstance(target, core.OpenFile)


def is_remote(target: Any) -> bool:
    """True for what is read through a RemoteFile: a non-``file://`` URL, an fsspec file or a RemoteFile."""
    if isinstance(target, RemoteFile):
        return True
    if is_url(target):
        return _local_path(target) is None
    return _fsspec_file(target) or _open_file(target)


def _chain_and_target(url: str) -> tuple[str, str]:
    """(``"simplecache::"``, ``"s3://b/k"``) of a chained URL: the outer links carry no "://"."""
    start = _SCHEME.search(url)
    return (url[:start.start()], url[start.start():]) if start else ("", url)


def _is_http(url: str) -> bool:
    return _chain_and_target(url)[1].lower().startswith(("http://", "https://"))


def is_url_pattern(url: str) -> bool:
    """True for a URL with glob characters (``*``, ``?``, ``[``), as fsspec reads them; in an HTTP(S) URL
    only its path counts (``?`` starts the query, ``[`` an IPv6 host)."""
    if _is_http(url):
        return not _URL_GLOB_CHARACTERS.isdisjoint(urlsplit(_chain_and_target(url)[1]).path)
    return not _URL_GLOB_CHARACTERS.isdisjoint(url)


def expand_url_pattern(pattern: str, storage_options: dict | None = None) -> list[str]:
    """The URLs a glob URL (``s3://bucket/shards/*.kdb``) matches, sorted, with their protocol (and chain) kept."""
    if _is_http(pattern):
        raise UnsupportedError(f"{pattern}: HTTP(S) servers cannot be listed, so a glob over them cannot be "
                               f"expanded; give the URLs one by one")
    fsspec = require("fsspec", "a URL glob")
    fs, path = fsspec.core.url_to_fs(pattern, **(storage_options or {}))
    chain, target = _chain_and_target(pattern)
    # The pattern's own scheme, not the filesystem's first name (adlfs would turn az:// into abfs://).
    scheme = target.partition("://")[0]
    try:
        matches = fs.glob(path)
    except (FileNotFoundError, PermissionError):
        raise
    except Exception as error:  # noqa: BLE001 - botocore/gcsfs/aiohttp errors become one named error
        raise RemoteError(f"{pattern}: cannot list ({type(error).__name__}: {error})") from None
    return sorted(f"{chain}{scheme}://{match}" for match in matches)


def resolve(target: Any, storage_options: dict | None = None) -> Any:
    """A RemoteFile for URLs and fsspec files, the path of a ``file://`` URL, else ``target`` unchanged."""
    if isinstance(target, RemoteFile):
        return target
    if is_url(target):
        local = _local_path(target)
        if local is not None:
            return local
        return RemoteFile(target, storage_options)
    if _fsspec_file(target) or _open_file(target):
        return RemoteFile(target, storage_options)
    if storage_options:
        raise TypeError(f"storage_options apply to URLs and fsspec files, not to {type(target).__name__}")
    return target


@dataclass
class SourceStats:
    """What reading a remote object has cost so far: requests sent and body bytes received."""

    requests: int = 0
    bytes_fetched: int = 0

    def reset(self) -> None:
        """Start counting again from zero."""
        self.requests = 0
        self.bytes_fetched = 0


class _Response(NamedTuple):
    data: bytes
    size: int | None   # the object's total size, when the response says it
    etag: str | None


# --------------------------------------------------------------------------- transports

class _AsyncTransport(abc.ABC):
    """A transport whose requests run on its async fsspec filesystem's event loop; the first
    response of a ranged GET tells the object's size."""

    size_from_first_response = True
    fs: Any
    url: str

    def get(self, start: int, stop: int) -> _Response:
        return require("fsspec.asyn", "reading URLs").sync(self.fs.loop, self._get, start, stop)

    @abc.abstractmethod
    async def _get(self, start: int, stop: int) -> _Response:
        """Bytes ``start..stop`` of the object, with its size and version when the reply gives them."""

    async def _object_call(self, call: Any, empty: Any) -> Any:
        """``await call()`` with the backend's errors named after the URL; ``await empty()`` answers
        a range that is not satisfiable (an empty object)."""
        try:
            return await call()
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.url) from None
        except PermissionError:
            raise
        except Exception as error:  # noqa: BLE001 - botocore/gcsfs/aiohttp errors become one named error
            if _range_not_satisfiable(error):
                return await empty()
            raise RemoteError(f"{self.url}: cannot read ({type(error).__name__}: {error})") from None


class _HTTPTransport(_AsyncTransport):
    """Ranged GETs through the aiohttp session of an fsspec HTTPFileSystem."""

    def __init__(self, fs: Any, url: str) -> None:
        self.fs = fs
        self.url = url

    async def _get(self, start: int, stop: int) -> _Response:
        aiohttp = require("aiohttp", "reading http(s) URLs")
        options = dict(self.fs.kwargs)
        headers = dict(options.pop("headers", None) or {})
        headers["Range"] = f"bytes={start}-{stop - 1}"
        try:
            session = await self.fs.set_session()
            async with session.get(self.fs.encode_url(self.url), headers=headers, **options) as response:
                status, reply = response.status, response.headers
                if status == 404:
                    raise FileNotFoundError(errno.ENOENT, "no such object (HTTP 404)", self.url)
                etag = reply.get("ETag")
                total = _total_size(reply.get("Content-Range"))
                if status == 416:  # nothing at start: an empty object, or a range past its end
                    return _Response(b"", total, etag)
                if status >= 400:
                    raise RemoteError(f"{self.url}: HTTP {status} {response.reason}")
                data = await response.read()
        except (aiohttp.ClientError, TimeoutError) as error:
            raise RemoteError(f"{self.url}: cannot read ({type(error).__name__}: {error})") from None
        if status != 206:  # the server ignored the range and sent the whole object
            return _Response(data[start:stop], len(data), etag)
        return _Response(data, total, etag)


def _total_size(content_range: str | None) -> int | None:
    match = _CONTENT_RANGE.match(content_range or "")
    return int(match.group(1)) if match else None


def _range_not_satisfiable(error: Exception) -> bool:
    """True for an HTTP 416 as s3fs and gcsfs raise it: nothing at the range's start (an empty object)."""
    # s3fs turns botocore's InvalidRange into OSError(EINVAL, "The requested range is not satisfiable").
    return (getattr(error, "code", None) == 416 or "InvalidRange" in str(error) or "416" in str(error)
            or "not satisfiable" in str(error))


class _S3Transport(_AsyncTransport):
    """Ranged GetObject calls through an s3fs filesystem's client."""

    def __init__(self, fs: Any, path: str, url: str) -> None:
        self.fs = fs
        self.url = url
        self.bucket, self.key, version = fs.split_path(path)
        self.version = {"VersionId": version} if version else {}

    async def _get(self, start: int, stop: int) -> _Response:
        async def call() -> Any:
            return await self.fs._call_s3("get_object", Bucket=self.bucket, Key=self.key,
                                          Range=f"bytes={start}-{stop - 1}", **self.version)

        async def empty() -> _Response:
            info = await self.fs._info(f"{self.bucket}/{self.key}", refresh=True)
            return _Response(b"", int(info["size"]), info.get("ETag"))

        response = await self._object_call(call, empty)
        if isinstance(response, _Response):
            return response
        try:
            data = await response["Body"].read()
        finally:
            response["Body"].close()
        total = _total_size(response.get("ContentRange"))
        return _Response(data, total if total is not None else len(data), response.get("ETag"))


class _GCSTransport(_AsyncTransport):
    """Ranged media GETs through a gcsfs filesystem's session (its ``info()`` would cost two requests more)."""

    def __init__(self, fs: Any, path: str, url: str) -> None:
        self.fs = fs
        self.path = path
        self.url = url
        self.zonal: bool | None = None

    async def _get(self, start: int, stop: int) -> _Response:
        if self.zonal is None:
            # gcsfs's extended filesystem reads zonal buckets over gRPC, not the JSON API: let it.
            lookup = getattr(self.fs, "_is_zonal_bucket", None)
            self.zonal = lookup is not None and await lookup(self.fs.split_path(self.path)[0])
        if self.zonal:
            info = await self.fs._info(self.path)
            data = await self.fs._cat_file(self.path, start=start, end=stop)
            return _Response(data, int(info["size"]), info.get("generation"))

        async def call() -> Any:
            return await self.fs._call("GET", self.fs.url(self.path), headers={"Range": f"bytes={start}-{stop - 1}"})

        async def empty() -> _Response:
            info = await self.fs._info(self.path, refresh=True)
            return _Response(b"", int(info["size"]), info.get("generation"))

        answer = await self._object_call(call, empty)
        if isinstance(answer, _Response):
            return answer
        reply, data = answer
        total = _total_size(reply.get("Content-Range"))
        # The generation names one version of the object; GCS sends it with every media response.
        version = reply.get("x-goog-generation") or reply.get("ETag")
        return _Response(data, total if total is not None else len(data), version)


class _FsspecTransport:
    """Any other fsspec filesystem: ``info()`` for the size, ``cat_file`` for ranges."""

    size_from_first_response = False

    def __init__(self, fs: Any, path: str, url: str) -> None:
        self.fs = fs
        self.path = path
        self.url = url

    def stat(self) -> _Response:
        try:
            info = self.fs.info(self.path)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.url) from None
        except OSError as error:
            raise RemoteError(f"{self.url}: cannot read ({error})") from None
        etag = info.get("ETag") or info.get("etag") or info.get("checksum")
        return _Response(b"", int(info["size"]), str(etag) if etag is not None else None)

    def get(self, start: int, stop: int) -> _Response:
        try:
            return _Response(self.fs.cat_file(self.path, start=start, end=stop), None, None)
        except FileNotFoundError:
            raise FileNotFoundError(errno.ENOENT, "no such object", self.url) from None


def _transport(fs: Any, path: str, url: str) -> Any:
    protocols = {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)
    if protocols & {"http", "https"}:
        return _HTTPTransport(fs, path)
    if protocols & {"s3", "s3a"} and hasattr(fs, "_call_s3"):
        return _S3Transport(fs, path, url)
    if protocols & {"gs", "gcs"} and hasattr(fs, "_call") and hasattr(fs, "url"):
        return _GCSTransport(fs, path, url)
    return _FsspecTransport(fs, path, url)


# --------------------------------------------------------------------------- the cache

class _BlockCache:
    """Fetched extents (start -> bytes), least recently used dropped first once over ``capacity`` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.held = 0
        self._extents: OrderedDict[int, bytes] = OrderedDict()
        self._starts: list[int] = []

    def _containing(self, offset: int) -> tuple[int, bytes] | None:
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

    def add(self, start: int, data: bytes) -> None:
        """Keep ``data`` fetched at ``start`` (not when it alone exceeds the capacity)."""
        if len(data) > self.capacity or not data:
            return
        if start in self._extents:
            self._drop(start)
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


# --------------------------------------------------------------------------- the remote object

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
        fsspec = require("fsspec", "reading URLs")
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
        elif is_url(target):
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

    def iter_ranges(self, ranges: Iterable[tuple[int, int]], *, part: int = 8 << 20,
                    threads: int = 8) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes) of the ``(offset, length)`` ranges in parts of at most ``part`` bytes, in order,
        fetched ``threads`` parts at a time (at most that many parts in memory); nothing goes through the
        cache, so a whole object can stream through without a second copy or a temporary file."""
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

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

    def prefetch(self, ranges: Iterable[tuple[int, int]], gap: int = 0) -> None:
        """Fetch the ``(offset, length)`` ranges about to be read, those at most ``gap`` apart in one request."""
        if not self.closed:
            self.remote.prefetch(ranges, gap)

    def close(self) -> None:
        """Mark closed; a RemoteFile this source opened itself drops its cache."""
        if not self.closed and self._owns:
            self.remote.release()
        super().close()


def open_source(target: Any, errors: ErrorKinds) -> RemoteSource:
    """A RemoteSource over a URL, an fsspec file or a RemoteFile."""
    owns = not isinstance(target, RemoteFile)
    remote = resolve(target)
    try:
        return RemoteSource(remote, errors, owns=owns)
    except FileNotFoundError:
        raise
    except OSError as error:
        if isinstance(error, RemoteError):
            raise
        raise RemoteError(f"{remote.name}: cannot read ({error})") from None


# --------------------------------------------------------------------------- writing

def _target_fs(target: Any) -> tuple[Any, str, str]:
    if isinstance(target, RemoteFile):
        return target.fs, target.path, target.url
    if _open_file(target):
        return target.fs, target.path, target.full_name
    fsspec = require("fsspec", "reading URLs")
    fs, path = fsspec.core.url_to_fs(target)
    return fs, path, target


def _protocols(fs: Any) -> set[str]:
    return {fs.protocol} if isinstance(fs.protocol, str) else set(fs.protocol)


@contextlib.contextmanager
def remote_output(target: Any) -> Iterator[BinaryIO]:
    """A seekable local spool for a new remote object, published only if the block ends without error.

    Object stores receive a (multipart) upload that they publish whole when
    it completes, and that is aborted on failure; other filesystems get a
    temporary key moved onto the target. A ``file://`` URL is an atomic
    local write. A killed process leaves at most an unfinished upload, never
    an object at the target.
    """
    if is_url(target) and _local_path(target) is not None:
        with atomic_write(_local_path(target)) as stream:  # type: ignore[arg-type]
            yield stream
        return
    fs, path, url = _target_fs(target)
    protocols = _protocols(fs)
    if protocols & {"http", "https"}:
        raise UnsupportedError(f"{url}: writing over HTTP is not supported; write to an object store")
    with tempfile.TemporaryFile(prefix="arrayio-upload-") as spool:
        yield spool
        spool.flush()
        spool.seek(0)
        if protocols & WHOLE_ON_CLOSE:
            _upload_whole(fs, path, spool, url)
        else:
            _upload_and_move(fs, path, spool, url)


def _upload_whole(fs: Any, path: str, spool: BinaryIO, url: str) -> None:
    stream = fs.open(path, "wb", block_size=UPLOAD_PART_BYTES)
    try:
        shutil.copyfileobj(spool, stream, UPLOAD_PART_BYTES)
    except BaseException:
        with contextlib.suppress(Exception):
            stream.discard()
        raise
    stream.close()


def _upload_and_move(fs: Any, path: str, spool: BinaryIO, url: str) -> None:
    parent, _, name = path.rpartition("/")
    temporary = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp" if parent else f".{name}.{uuid.uuid4().hex}.tmp"
    try:
        with fs.open(temporary, "wb") as stream:
            shutil.copyfileobj(spool, stream, UPLOAD_PART_BYTES)
        fs.mv(temporary, path)
    except BaseException:
        with contextlib.suppress(Exception):
            fs.rm(temporary)
        raise
