"""Ranged GETs through obstore (Rust ``object_store``) for ``s3://``, ``gs://``, ``az://`` and ``http(s)://``.

``storage_options`` keys that users pass to s3fs, gcsfs, adlfs and fsspec's
HTTP filesystem are mapped to obstore's configuration; a key without an
equivalent sends the URL to the fsspec transport instead (or, when obstore was
asked for by name, raises). Stores are kept per process (one connection pool
per bucket or origin and options), so dask tasks of one worker share one.

Every answer is checked like the fsspec transports' answers: the range
returned must be the range asked, the body is read in a stream and never past
the length asked, and connect, read and whole-request timeouts apply.
"""

from __future__ import annotations

import errno
import importlib.util
import os
import threading
from datetime import timedelta
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np

from .._optional import require
from ..errors import RemoteError, UnsupportedError
from ._settings import TransportSettings, preferred_client
from ._transports import _Response, check_answered_range

SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "http", "https"})
# obstore retries transient failures itself; a hostile or dead server should not cost minutes.
_RETRIES = {"max_retries": 2, "retry_timeout": timedelta(seconds=30)}

_S3_KEYS = {"key": "access_key_id", "secret": "secret_access_key", "token": "session_token",
            "endpoint_url": "endpoint", "region": "region", "region_name": "region"}
# Keys of fsspec backends that change nothing about how one object is read.
_HARMLESS = frozenset({"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths",
                       "default_block_size", "default_cache_type", "asynchronous", "loop", "project",
                       "requester_pays", "version_aware", "cache_regions", "use_ssl", "retries",
                       "config_kwargs", "consistency", "block_size", "default_fill_cache"})

# Bytes of each piece of a body streamed into place. Each piece is a fresh bytes object: below glibc's
# mmap threshold (128 KiB, fixed in dask workers by MALLOC_TRIM_THRESHOLD_) it reuses heap memory; 1 MiB pieces
# were mapped, page-faulted and unmapped one by one (1 GiB on loopback: 1.25 s of CPU against 0.80 s).
STREAM_PIECE = 64 << 10

_stores: dict[tuple, Any] = {}
_stores_lock = threading.Lock()
# The process that started obstore's runtime: its threads do not survive a fork, and every obstore call in
# a forked child (a DataLoader worker) would wait on them forever, so children read through fsspec.
_runtime_pid: list[int] = []


def forked() -> bool:
    """True in a process forked from one that used obstore (where obstore would hang)."""
    return bool(_runtime_pid) and _runtime_pid[0] != os.getpid()


def available() -> bool:
    """True when obstore can be imported."""
    return importlib.util.find_spec("obstore") is not None


class _NoEquivalent(Exception):
    """A storage option obstore has no equivalent for: the URL goes to fsspec."""


def _flatten(options: dict) -> dict[str, Any]:
    """``client_kwargs`` merged into the top level (s3fs puts ``endpoint_url`` and ``region_name`` there)."""
    flat = {key: value for key, value in options.items() if key != "client_kwargs"}
    for key, value in (options.get("client_kwargs") or {}).items():
        flat.setdefault(key, value)
    return flat


def _is_true(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "1", "yes")


def _s3_config(options: dict) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, value in _flatten(options).items():
        if key in _S3_KEYS:
            config[_S3_KEYS[key]] = value
        elif key == "anon":
            config["skip_signature"] = _is_true(value)
        elif key not in _HARMLESS:
            raise _NoEquivalent(key)
    return config


def _gcs_config(options: dict) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, value in _flatten(options).items():
        if key == "endpoint_url":
            config["base_url"] = value
        elif key in ("token", "anon"):
            if value == "anon" or (key == "anon" and _is_true(value)):
                config["skip_signature"] = True
            elif isinstance(value, str) and value.endswith(".json"):
                config["service_account"] = value
            elif value not in (None, "google_default"):
                raise _NoEquivalent(key)
        elif key not in _HARMLESS:
            raise _NoEquivalent(key)
    return config


def _azure_config(options: dict) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key, value in _flatten(options).items():
        if key == "connection_string":
            fields = dict(part.split("=", 1) for part in str(value).split(";") if "=" in part)
            config["account_name"] = fields.get("AccountName")
            if "AccountKey" in fields:
                config["account_key"] = fields["AccountKey"]
            if "BlobEndpoint" in fields:
                # The endpoint as given (obstore's use_emulator would replace it with Azurite's default port).
                config["endpoint"] = fields["BlobEndpoint"].rstrip("/")
            if "SharedAccessSignature" in fields:
                config["sas_key"] = fields["SharedAccessSignature"]
        elif key in ("account_name", "account_key", "client_id", "client_secret", "tenant_id"):
            config[key] = value
        elif key == "sas_token":
            config["sas_key"] = value
        elif key == "anon":
            config["skip_signature"] = _is_true(value)
        elif key not in _HARMLESS:
            raise _NoEquivalent(key)
    return {key: value for key, value in config.items() if value is not None}


def _client_options(settings: TransportSettings, allow_http: bool) -> dict[str, Any]:
    # No whole-request limit unless one is set: a big part on a slow link is not a stalled one.
    return {"allow_http": allow_http, "connect_timeout": f"{settings.connect_timeout}s",
            "read_timeout": f"{settings.read_timeout}s",
            "timeout": f"{settings.timeout if settings.timeout is not None else 86400}s"}


def _store_and_path(url: str, options: dict, settings: TransportSettings) -> tuple[Any, str]:
    """The obstore store (shared per process) and the object's path in it."""
    stores = require("obstore.store", "reading URLs through obstore")
    AzureStore, GCSStore, HTTPStore, S3Store = stores.AzureStore, stores.GCSStore, stores.HTTPStore, stores.S3Store

    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme in ("http", "https"):
        if options:  # headers, auth, client_kwargs: fsspec's transport keeps redirects on the origin
            raise _NoEquivalent(next(iter(options)))
        if parts.query or parts.fragment:
            raise _NoEquivalent("a query string")
        kind, where, config, path = "http", f"{scheme}://{parts.netloc}", {}, unquote(parts.path.lstrip("/"))
        allow_http = scheme == "http"
    else:
        config = (_s3_config(options) if scheme in ("s3", "s3a") else _gcs_config(options) if scheme in ("gs", "gcs")
                  else _azure_config(options))
        kind, where, path = scheme, parts.netloc, unquote(parts.path.lstrip("/"))
        # An endpoint from the environment (as s3fs and gcsfs read it) may be plain HTTP too.
        endpoint = str(config.get("endpoint") or config.get("base_url") or os.environ.get("AWS_ENDPOINT_URL")
                       or os.environ.get("AWS_ENDPOINT") or "")
        allow_http = endpoint.startswith("http://")
    key = (kind, where, repr(sorted(config.items())), settings.connect_timeout, settings.read_timeout,
           settings.timeout)
    with _stores_lock:
        if not _runtime_pid:
            _runtime_pid.append(os.getpid())
        store = _stores.get(key)
        if store is None:
            # obstore types these as TypedDicts; ours are built from user input, checked by obstore itself.
            client: Any = _client_options(settings, allow_http)
            retries: Any = _RETRIES
            if kind == "http":
                store = HTTPStore.from_url(where, client_options=client, retry_config=retries)
            else:
                make: Any = S3Store if kind in ("s3", "s3a") else GCSStore if kind in ("gs", "gcs") else AzureStore
                store = make(where, config=config, client_options=client, retry_config=retries)
            _stores[key] = store
    return store, path


def obstore_transport(url: str, options: dict, settings: TransportSettings) -> _ObstoreTransport | None:
    """An obstore transport for ``url``, or None when the fsspec transport should read it."""
    if preferred_client(settings) == "fsspec":
        return None
    asked = settings.client == "obstore"  # by name: a URL obstore cannot read is an error, not a fallback
    scheme = url.partition("://")[0].lower()
    reason = ""
    if not available():
        reason = "obstore is not installed (pip install 'arrayio[remote]')"
    elif forked():
        reason = "this process was forked from one that used obstore, whose runtime does not survive a fork"
    elif "::" in url or scheme not in SCHEMES:
        reason = f"obstore reads {', '.join(sorted(SCHEMES))} URLs, not chained or other ones"
    else:
        try:
            store, path = _store_and_path(url, options, settings)
        except _NoEquivalent as key:
            reason = f"storage option {key} has no obstore equivalent"
        else:
            return _ObstoreTransport(store, path, url)
    if asked:
        raise UnsupportedError(f"{url}: storage_options client='obstore' cannot be used: {reason}")
    return None


class _ObstoreTransport:
    """Ranged GETs through one obstore store; the first answer tells the object's size and ETag."""

    size_from_first_response = True
    reads_into = True  # get() can fill the caller's buffer: the parts of a big read land in place

    def __init__(self, store: Any, path: str, url: str) -> None:
        self.store = store
        self.path = path
        self.url = url

    def get(self, start: int, stop: int, into: memoryview | None = None) -> _Response:
        """Bytes ``start..stop`` (fewer at the object's end), checked and bounded; written into ``into``
        (exactly ``stop - start`` bytes, inside the object) and returned as it when given."""
        obstore = require("obstore", "reading URLs through obstore")

        try:
            result = obstore.get(self.store, self.path, options={"range": (start, stop)})
            meta = result.meta
            first, end = result.range
            size = int(meta["size"])
            check_answered_range(self.url, start, stop, (first, end - 1, size))
            data = _read_exactly(result, end - first, self.url) if into is None else _read_into(result, into,
                                                                                                  self.url)
        except (FileNotFoundError, obstore.exceptions.NotFoundError):
            raise FileNotFoundError(errno.ENOENT, "no such object", self.url) from None
        except obstore.exceptions.BaseError as error:
            if start == 0 or "range" in str(error).lower():
                empty = self._empty_or_none(start)
                if empty is not None:
                    return empty
            raise RemoteError(f"{self.url}: cannot read ({type(error).__name__}: "
                              f"{str(error).splitlines()[0]})") from None
        return _Response(data, size, meta.get("e_tag") or meta.get("version"))

    def _empty_or_none(self, start: int) -> _Response | None:
        """The answer for a range past the object's end (an empty object): nothing, and the size."""
        obstore = require("obstore", "reading URLs through obstore")

        try:
            meta = obstore.head(self.store, self.path)
        except obstore.exceptions.BaseError:
            return None
        size = int(meta["size"])
        return _Response(b"", size, meta.get("e_tag") or meta.get("version")) if start >= size else None


def _read_exactly(result: Any, length: int, url: str) -> bytes:
    """The body of ``result``, which must be ``length`` bytes: read as a stream, so a body longer than
    announced is stopped one network chunk past ``length`` instead of being read whole."""
    stream = result.stream(min_chunk_size=max(1, length))
    pieces: list[bytes] = []
    count = 0
    for piece in stream:
        pieces.append(piece)
        count += len(piece)
        if count >= length:
            break
    if count > length or (count == length and next(iter(stream), b"")):
        raise RemoteError(f"{url}: the body runs past the {length} bytes asked for")
    if count < length:
        raise RemoteError(f"{url}: the body ended after {count} of the {length} bytes asked for")
    return pieces[0] if len(pieces) == 1 else b"".join(pieces)


def _read_into(result: Any, into: memoryview, url: str) -> memoryview:
    """The body of ``result`` written into ``into``, which it must fill exactly: streamed in pieces of
    STREAM_PIECE bytes, each copied into place (numpy), stopped at the first piece past the end."""
    target = np.frombuffer(into, np.uint8)
    count = 0
    for piece in result.stream(min_chunk_size=STREAM_PIECE):
        if count + len(piece) > len(target):
            raise RemoteError(f"{url}: the body runs past the {len(target)} bytes asked for")
        target[count:count + len(piece)] = np.frombuffer(piece, np.uint8)
        count += len(piece)
    if count < len(target):
        raise RemoteError(f"{url}: the body ended after {count} of the {len(target)} bytes asked for")
    return into
