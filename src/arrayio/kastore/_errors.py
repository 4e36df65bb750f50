"""kastore's exception names (as in PyPI kastore 0.3.6), subclassing arrayio's hierarchy."""

from __future__ import annotations

from .. import errors as _errors
from .._keyed import KeyDecodeError as _KeyDecodeError
from ..errors import ClosedError, ErrorKinds
from ._records import FORMAT_NAME


class KastoreException(Exception):
    """Base of the kastore-compatible exceptions (as in PyPI kastore)."""


class FileFormatError(KastoreException, _errors.FormatError):
    """The bytes are not a valid kastore file."""


class KeyDecodeError(FileFormatError, _KeyDecodeError):
    """A key that does not decode in the store's key encoding (kastore raises UnicodeDecodeError)."""


class TruncatedFileError(FileFormatError, _errors.TruncatedError):
    """A kastore range runs past the end of the data."""


class VersionTooOldError(KastoreException, _errors.VersionTooOldError):
    """The file's major version is older than 1."""


class VersionTooNewError(KastoreException, _errors.VersionTooNewError):
    """The file's major version is newer than 1."""


class NoStoreError(TruncatedFileError, EOFError):
    """The data ends where a store should begin (0 bytes): the clean end of a stream of stores.

    It is a FormatError for callers who treat empty input as malformed and an
    EOFError (what kastore raises) for loops that read concatenated stores until the end.
    """


class StoreClosedError(KastoreException, ClosedError):
    """The store was closed; its arrays can no longer be looked up."""


ERRORS = ErrorKinds(FORMAT_NAME, format_error=FileFormatError, truncated=TruncatedFileError,
                    too_old=VersionTooOldError, too_new=VersionTooNewError)
