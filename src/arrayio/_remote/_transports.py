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
import re
import sys
from typing import Any, NamedTuple

from ..errors import RemoteError

_CONTENT_RANGE = re.compile(r"bytes\s+(?:\d+-\d+|\*)/(\d+)")


def _fsspec_file(target: Any) -> bool:
    spec = sys.modules.get("fsspec.spec")
    return spec is not None and hasattr(target, "read") and isinstance(getattr(target, "fs", None),
                                                                       spec.AbstractFileSystem)


def _open_file(target: Any) -> bool:
    core = sys.modules.get("fsspec.core")
    return core is not None and isinstance(target, core.OpenFile)



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
        from fsspec.asyn import sync

        return sync(self.fs.loop, self._get, start, stop)

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
        import aiohttp

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

