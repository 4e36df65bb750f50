"""Ranged GETs over HTTP(S) through the aiohttp session of an fsspec HTTPFileSystem, bounded and checked.

A server is not trusted: the body is read only up to the length asked for,
compressed bodies are refused (identity is asked for), the range answered must
be the range asked, redirects stay on the URL's origin unless allowed, and
connect, read and whole-request timeouts apply.
"""

from __future__ import annotations

import errno
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple
from urllib.parse import urljoin, urlsplit

from .._optional import require
from ..errors import RemoteError
from . import _byteranges as byteranges
from ._settings import TransportSettings
from ._transports import (
    _AsyncTransport,
    _Response,
    check_answered_range,
    content_range,
    refuse_encoding,
    total_size,
)

_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_MAX_REDIRECTS = 5
_DEFAULT_PORTS = {"http": 80, "https": 443}


class _Parts(NamedTuple):
    """What one several-range GET answered: ``(first byte, bytes)`` parts, the object's size and ETag."""

    parts: list[tuple[int, memoryview]]
    size: int
    etag: str | None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


class _HTTPTransport(_AsyncTransport):
    """Ranged GETs through the aiohttp session of an fsspec HTTPFileSystem."""

    def __init__(self, fs: Any, url: str, settings: TransportSettings) -> None:
        self.fs = fs
        self.url = url
        self.settings = settings

    def _timeout(self) -> Any:
        aiohttp = require("aiohttp", "reading http(s) URLs")
        return aiohttp.ClientTimeout(total=self.settings.timeout, sock_connect=self.settings.connect_timeout,
                                     sock_read=self.settings.read_timeout)

    def _follow(self, current: Any, location: str | None) -> str:
        """The URL a redirect leads to, when it may be followed."""
        if not location:
            raise RemoteError(f"{self.url}: redirect without a Location")
        target = urljoin(str(current), location)
        if _origin(target) != _origin(self.url) and not self.settings.cross_origin_redirects:
            raise RemoteError(f"{self.url}: the server redirects to another origin ({target}); not followed, "
                              f"since the request's headers could carry credentials "
                              f"(storage_options cross_origin_redirects=True allows it)")
        return target

    async def _get(self, start: int, stop: int) -> _Response:
        return await self._send(f"bytes={start}-{stop - 1}", lambda response: self._answer(response, start, stop))

    def get_ranges(self, spans: Sequence[tuple[int, int]]) -> _Parts | None:
        """Several ``(start, stop)`` spans in one GET (``multipart/byteranges``); None when the server answers
        with the whole object instead (it was not read: the connection is dropped)."""
        return require("fsspec.asyn", "reading URLs").sync(
            self.fs.loop, self._send, byteranges.range_header(spans), lambda response: self._parts(response, spans))

    async def _send(self, wanted: str, answer: Callable[[Any], Awaitable[Any]]) -> Any:
        """``answer(response)`` of a GET of the byte ranges ``wanted``, redirects followed on the origin."""
        aiohttp = require("aiohttp", "reading http(s) URLs")
        options = dict(self.fs.kwargs)
        options.pop("allow_redirects", None)  # redirects are followed here, origin checked
        headers = dict(options.pop("headers", None) or {})
        headers["Range"] = wanted
        headers["Accept-Encoding"] = "identity"
        url = self.fs.encode_url(self.url)
        try:
            session = await self.fs.set_session()
            for _hop in range(_MAX_REDIRECTS + 1):
                async with session.get(url, headers=headers, allow_redirects=False, timeout=self._timeout(),
                                       auto_decompress=False, **options) as response:
                    if response.status in _REDIRECTS:
                        url = self._follow(url, response.headers.get("Location"))
                        continue
                    return await answer(response)
        except (aiohttp.ClientError, TimeoutError) as error:
            kind = "timed out" if isinstance(error, TimeoutError) else f"{type(error).__name__}: {error}"
            raise RemoteError(f"{self.url}: cannot read ({kind})") from None
        raise RemoteError(f"{self.url}: more than {_MAX_REDIRECTS} redirects")

    async def _parts(self, response: Any, spans: Sequence[tuple[int, int]]) -> _Parts | None:
        """The parts of an answer to a several-range GET: a multipart body, or one part where the server
        joined the ranges into one; None for a 200 (the server ignores several ranges)."""
        status, reply = response.status, response.headers
        if status == 404:
            raise FileNotFoundError(errno.ENOENT, "no such object (HTTP 404)", self.url)
        if status != 206:
            if status >= 400 and status != 416:
                raise RemoteError(f"{self.url}: HTTP {status} {response.reason}")
            response.close()  # a whole object (or nothing) where ranges were asked: never read it
            return None
        refuse_encoding(self.url, reply.get("Content-Encoding"))
        limit = byteranges.body_limit(spans)
        delimiter = byteranges.boundary(reply.get("Content-Type"))
        if delimiter is None:  # one range: the server joined those asked (or kept only some)
            answered = content_range(reply.get("Content-Range"))
            if answered is None or answered[1] + 1 - answered[0] > limit:
                raise RemoteError(f"{self.url}: a partial answer to {len(spans)} ranges with no valid "
                                  f"Content-Range or more bytes than asked for")
            data = await self._read(response, answered[1] + 1 - answered[0], exact=True)
            return _Parts([(answered[0], memoryview(data))], answered[2], reply.get("ETag"))
        body = await self._read(response, limit, exact=False)
        if len(body) == limit:
            raise RemoteError(f"{self.url}: a multipart/byteranges answer larger than the {limit} bytes that "
                              f"{len(spans)} ranges can take")
        parts, size = byteranges.parse_parts(self.url, body, delimiter)
        return _Parts(parts, size, reply.get("ETag"))

    async def _answer(self, response: Any, start: int, stop: int) -> _Response:
        """The bytes of one response, never more than asked for."""
        status, reply = response.status, response.headers
        if status == 404:
            raise FileNotFoundError(errno.ENOENT, "no such object (HTTP 404)", self.url)
        etag = reply.get("ETag")
        if status == 416:  # nothing at start: an empty object, or a range past its end
            return _Response(b"", total_size(reply.get("Content-Range")), etag)
        if status >= 400:
            raise RemoteError(f"{self.url}: HTTP {status} {response.reason}")
        refuse_encoding(self.url, reply.get("Content-Encoding"))
        if status == 206:
            answered = content_range(reply.get("Content-Range"))
            first, last, total = check_answered_range(self.url, start, stop, answered)
            data = await self._read(response, last + 1 - first, exact=True)
            return _Response(data, total, etag)
        # A 200: the server ignored the range and sends the object from its start.
        if start != 0:
            raise RemoteError(f"{self.url}: the server ignores byte ranges (HTTP {status} to a ranged GET of bytes "
                              f"{start}..{stop - 1}); arrayio reads remote objects only in ranges")
        data = await self._read(response, stop, exact=False)
        whole = response.content_length
        if whole is None and len(data) == stop and not response.content.at_eof():
            raise RemoteError(f"{self.url}: the server ignores byte ranges and does not say the object's size")
        return _Response(data, whole if whole is not None else len(data), etag)

    async def _read(self, response: Any, limit: int, *, exact: bool) -> bytearray:
        """At most ``limit`` body bytes; with ``exact``, a body of another length is an error."""
        declared = response.content_length
        if exact and declared is not None and declared != limit:
            raise RemoteError(f"{self.url}: the server announces a body of {declared} bytes for a range of {limit}")
        buffer = bytearray(limit)
        view = memoryview(buffer)
        count = 0
        while count < limit:
            chunk = await response.content.read(limit - count)
            if not chunk:
                break
            view[count:count + len(chunk)] = chunk
            count += len(chunk)
        if exact:
            if count < limit:
                raise RemoteError(f"{self.url}: the body ended after {count} of the {limit} bytes asked for")
            if await response.content.read(1):
                raise RemoteError(f"{self.url}: the body runs past the {limit} bytes asked for")
        if not response.content.at_eof():
            response.close()  # the rest is never read: drop the connection rather than drain it
        view.release()
        del buffer[count:]
        return buffer
