"""The KAST layout's exceptions, subclassing arrayio's hierarchy."""

from __future__ import annotations

from .. import errors as _errors
from ..errors import ClosedError, ErrorKinds
from ._records import FORMAT_NAME


class NoStoreError(_errors.TruncatedError, EOFError):
    """The data ends where a store should begin (0 bytes): the clean end of a stream of stores.

    It is a FormatError for callers who treat empty input as malformed and an
    EOFError for loops that read concatenated stores until the end.
    """


class StoreClosedError(ClosedError):
    """The store was closed; its arrays can no longer be looked up."""


ERRORS = ErrorKinds(FORMAT_NAME)
