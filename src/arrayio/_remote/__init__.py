"""Remote objects read in byte ranges: transports (fsspec, obstore), the bounded cache, ``RemoteFile``
and the ``RemoteSource`` the formats read through."""

from ._file import DEFAULT_CACHE_BYTES, DEFAULT_READAHEAD, RemoteFile, RemoteSource, SourceStats, fetch_ranges
from ._transports import _fsspec_file, _open_file

__all__ = ["DEFAULT_CACHE_BYTES", "DEFAULT_READAHEAD", "RemoteFile", "RemoteSource", "SourceStats",
           "_fsspec_file", "_open_file", "fetch_ranges"]
