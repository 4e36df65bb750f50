"""The tszip format's exceptions, subclassing arrayio's hierarchy."""

from __future__ import annotations

from ..errors import ClosedError, ErrorKinds
from ._records import FORMAT_NAME


class TszipClosedError(ClosedError):
    """The tszip file was closed; its columns can no longer be read."""


ERRORS = ErrorKinds(FORMAT_NAME)
