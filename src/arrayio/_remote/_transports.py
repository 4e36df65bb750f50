"""How bytes of one remote object are fetched: a transport per protocol family, each answering
``get(start, stop) -> _Response`` with the object's size and version when the reply tells them.

HTTP(S), S3 and GCS are spoken to below fsspec's file layer: the first
request is a ranged GET whose ``Content-Range`` gives both the head bytes and
the object's size, so opening needs no HEAD. Other fsspec backends cost one
``info()`` call more.
"""

from __future__ import annotations

import abc
import errno
import os
import re
import selectors
import sys
import weakref
from typing import Any, NamedTuple

from .._optional import require
from ..errors import RemoteError

_CONTENT_RANGE = re.compile(r"bytes\s+(?:\d+-\d+|\*)/(\d+)")
_ANSWERED_RANGE = re.compile(r"bytes\s+(\d+)-(\d+)/(\d+)$")


def _fsspec_file(target: Any) -> bool:
    spec = sys.modules.get("fsspec.spec")
    return spec is not None and hasattr(target, "read") and isinstance(getattr(target, "fs", None),
                                                                       spec.AbstractFileSystem)


def _open_file(target: Any) -> bool:
    core = sys.modules.get("fsspec.core")
    return core is not None and isinstance(target, core.OpenFile)


# A forked process inherits the parent's fsspec event loop with its epoll set and its pooled sockets. Closing an
# inherited session there (fsspec's finalizer of a filesystem the child drops, aiohttp's connector when it is
# collected) took the parent's sockets out of that shared epoll set, so the parent's next read on such a
# connection waited out its read timeout (a DataLoader worker ending broke the main process's HTTP reads).
_PARENT_LOOPS: list[Any] = []


def _note_the_fsspec_loop() -> None:
    """(In the parent, about to fork) remember fsspec's event loop, if one runs."""
    asyn = sys.modules.get("fsspec.asyn")
    _PARENT_LOOPS[:] = [loop for loop in getattr(asyn, "loop", []) if loop is not None]


def _leave_the_parents_sockets() -> None:
    """(In the child) give the inherited loop an epoll set of this process's own and no one to report to
    (aiohttp reports the parent's connections it closes there as unclosed), and never run fsspec's
    ``close_session`` finalizers of inherited filesystems (each also waited on a loop that runs no more)."""
    for loop in _PARENT_LOOPS:
        if getattr(loop, "_selector", None) is not None:
            loop._selector = selectors.DefaultSelector()
            loop.set_exception_handler(lambda loop, context: None)
    _PARENT_LOOPS.clear()
    registry = getattr(weakref.finalize, "_registry", {})  # there is no public way to list finalizers
    for finalizer, info in list(registry.items()):
        if getattr(info.func, "__name__", "") == "close_session":
            finalizer.detach()


os.register_at_fork(before=_note_the_fsspec_loop, after_in_child=_leave_the_parents_sockets,
                    after_in_parent=_PARENT_LOOPS.clear)


class _Response(NamedTuple):
    data: bytes | bytearray | memoryview
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


def total_size(content_range: str | None) -> int | None:
    """The object's size from a ``Content-Range`` header (``bytes a-b/N`` or ``bytes */N``), else None."""
    match = _CONTENT_RANGE.match(content_range or "")
    return int(match.group(1)) if match else None


def content_range(header: str | None) -> tuple[int, int, int] | None:
    """(first, last, total) of a ``Content-Range: bytes first-last/total`` header, else None."""
    match = _ANSWERED_RANGE.match((header or "").strip())
    return None if match is None else (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def check_answered_range(url: str, start: int, stop: int,
                         answered: tuple[int, int, int] | None) -> tuple[int, int, int]:
    """The (first, last, total) a 206 answered, when it is the range asked for (``stop`` clipped to the end)."""
    if answered is None:
        raise RemoteError(f"{url}: a partial answer without a valid Content-Range (asked for bytes "
                          f"{start}..{stop - 1})")
    first, last, total = answered
    if first != start or last + 1 != min(stop, total) or last < first:
        raise RemoteError(f"{url}: asked for bytes {start}..{min(stop, total) - 1}, the server answered bytes "
                          f"{first}..{last} of {total}; refusing a range other than the one asked")
    return answered


def refuse_encoding(url: str, encoding: str | None) -> None:
    """Refuse a compressed body: its decoded size is unbounded by the range asked for."""
    if encoding and encoding.strip().lower() not in ("identity", ""):
        raise RemoteError(f"{url}: the server sent a body with Content-Encoding {encoding} though identity "
                          f"was asked for; refused (a compressed body's decoded size is not bounded)")


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
            refuse_encoding(self.url, response.get("ContentEncoding"))
            answered = content_range(response.get("ContentRange"))
            if answered is None and start == 0 and int(response.get("ContentLength", stop + 1)) <= stop:
                answered = (0, int(response["ContentLength"]) - 1, int(response["ContentLength"]))
            first, last, total = check_answered_range(self.url, start, stop, answered)
            if int(response.get("ContentLength", -1)) != last + 1 - first:
                raise RemoteError(f"{self.url}: the server announces a body of {response.get('ContentLength')} "
                                  f"bytes for a range of {last + 1 - first}")
            data = await response["Body"].read()
        finally:
            response["Body"].close()
        return _Response(data, total, response.get("ETag"))


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
        refuse_encoding(self.url, reply.get("Content-Encoding"))
        answered = content_range(reply.get("Content-Range"))
        if answered is not None:
            check_answered_range(self.url, start, stop, answered)
        total = answered[2] if answered is not None else None
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
