"""arrayio's own keys in ``storage_options``: which client reads, timeouts, redirects, parallel reads, a
cache shared between processes.

They are taken out before the rest goes to the backend (fsspec's filesystem
or obstore's store), so one ``storage_options`` dict serves both clients.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ._shared import DEFAULT_BUDGET

CLIENTS = ("obstore", "fsspec")
# The process-wide choice of client, where storage_options name none (a deployment, a test run).
CLIENT_VARIABLE = "ARRAYIO_REMOTE_CLIENT"


@dataclass(frozen=True)
class TransportSettings:
    """How a remote object is fetched; each field is a ``storage_options`` key of the same name."""

    client: str | None = None            # "obstore" or "fsspec"; None: preferred_client()
    connect_timeout: float = 10.0        # seconds to open a connection
    read_timeout: float = 30.0           # seconds without a byte arriving before a request is given up
    timeout: float | None = None         # seconds for a whole request (None: no limit beyond the two above)
    cross_origin_redirects: bool = False  # follow a redirect to another scheme, host or port
    part_bytes: int = 8 << 20            # reads above this many bytes go out as ranged GETs of this size ...
    concurrency: int = 8                 # ... this many at a time, assembled into one buffer
    shared_cache: str | None = None      # a folder through which processes share the ranges they prefetch ...
    shared_cache_bytes: int = DEFAULT_BUDGET  # ... holding at most this many bytes

    def __post_init__(self) -> None:
        if self.client is not None and self.client not in CLIENTS:
            raise ValueError(f"storage_options client={self.client!r}: expected one of {', '.join(CLIENTS)}")
        for name in ("connect_timeout", "read_timeout", "timeout"):
            value = getattr(self, name)
            if value is not None and not float(value) > 0:
                raise ValueError(f"storage_options {name}={value!r}: expected a number of seconds above 0")
        if int(self.part_bytes) < 1 or int(self.concurrency) < 1 or int(self.shared_cache_bytes) < 1:
            raise ValueError(f"storage_options part_bytes={self.part_bytes!r}, concurrency={self.concurrency!r}, "
                             f"shared_cache_bytes={self.shared_cache_bytes!r}: expected positive integers")
        if self.shared_cache is not None and not os.path.isdir(self.shared_cache):
            raise ValueError(f"storage_options shared_cache={self.shared_cache!r}: expected an existing folder")


def preferred_client(settings: TransportSettings) -> str:
    """The client asked for: by ``storage_options``, else by $ARRAYIO_REMOTE_CLIENT, else obstore (where it can)."""
    choice = settings.client or os.environ.get(CLIENT_VARIABLE) or "obstore"
    if choice not in CLIENTS:
        raise ValueError(f"${CLIENT_VARIABLE}={choice!r}: expected one of {', '.join(CLIENTS)}")
    return choice


_KEYS = frozenset(field.name for field in fields(TransportSettings))


def checked_options(storage_options: Any) -> dict[str, Any]:
    """``storage_options`` as a new dict ({} for None); TypeError unless it is a mapping (a string such as
    "anon=true" failed deep in the backend with a message about dictionary update sequences)."""
    if storage_options is None:
        return {}
    if not isinstance(storage_options, Mapping):
        raise TypeError(f"storage_options must be a dict of options for the remote backend, got "
                        f"{storage_options!r} (on the command line: --storage-option KEY=VALUE)")
    return dict(storage_options)


def split_options(storage_options: dict | None) -> tuple[TransportSettings, dict[str, Any]]:
    """(arrayio's transport settings, the options left for the backend) of a ``storage_options`` dict."""
    options = checked_options(storage_options)
    ours = {key: options.pop(key) for key in list(options) if key in _KEYS}
    return TransportSettings(**ours), options
