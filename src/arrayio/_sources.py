"""Bytes that live elsewhere: where URLs and fsspec files go, and remote writes.

The remote objects themselves (transports, the bounded cache, ``RemoteFile``,
``RemoteSource``) live in ``_remote/``; this module decides what is remote and
publishes remote outputs.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any, BinaryIO
from urllib.parse import urlsplit

from ._binary import atomic_write
from ._interrupts import refuse_after_interrupt
from ._optional import require
from ._remote import (
    DEFAULT_CACHE_BYTES,
    DEFAULT_READAHEAD,
    RemoteFile,
    RemoteSource,
    SourceStats,
    _fsspec_file,
    _open_file,
)
from ._remote._settings import checked_options, split_options
from .errors import ErrorKinds, RemoteError, UnsupportedError

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

# Uploads go out in parts of this size; an object store publishes the object only when the last one lands.
UPLOAD_PART_BYTES = 16 << 20
# Object stores publish an object whole when its upload completes; elsewhere we write a temporary key and move it.
WHOLE_ON_CLOSE = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl"})

# A scheme of two or more letters (so "C:\\" stays a path), then "://", or fsspec's "::" chaining
# in front of one (so a file named "a::b.kas" stays a path).
_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]+(://|::.*://)")
_URL_GLOB_CHARACTERS = frozenset("*?[")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]+://")


def is_url(target: Any) -> bool:
    """True for a string that names a URL (``s3://``, ``https://``, ``simplecache::...``)."""
    return isinstance(target, str) and _URL.match(target) is not None


def _local_path(url: str) -> str | None:
    """The path of a plain ``file://`` URL (mapped like any local file), else None."""
    if url.startswith("file://") and "::" not in url:
        return url[len("file://"):]
    return None


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
    """The URLs a glob URL (``s3://bucket/shards/*.bin``) matches, sorted, with their protocol (and chain) kept."""
    if _is_http(pattern):
        raise UnsupportedError(f"{pattern}: HTTP(S) servers cannot be listed, so a glob over them cannot be "
                               f"expanded; give the URLs one by one")
    fsspec = require("fsspec", "a URL glob")
    _settings, backend_options = split_options(storage_options)  # arrayio's own keys are not s3fs's
    fs, path = fsspec.core.url_to_fs(pattern, **backend_options)
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


def target_list(targets: Any) -> list[Any]:
    """Many targets as a list: a path, URL or ``RemoteFile`` given alone is one target (a string is not a
    list of letters)."""
    return [targets] if isinstance(targets, (str, bytes, os.PathLike, RemoteFile)) else list(targets)


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
    if checked_options(storage_options):
        raise TypeError(f"storage_options apply to URLs and fsspec files, not to {type(target).__name__}")
    return target


def open_remote_source(target: Any, errors: ErrorKinds, storage_options: dict | None = None) -> RemoteSource:
    """A RemoteSource over a URL, an fsspec file or a RemoteFile (``arrayio._edge.open_source`` chooses)."""
    owns = not isinstance(target, RemoteFile)
    remote = resolve(target, storage_options)
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
        refuse_after_interrupt()
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
