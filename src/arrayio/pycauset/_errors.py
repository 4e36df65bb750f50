"""The error kinds of the pycauset container.

pycauset 0.6.1 raises plain ``ValueError`` for bad files; ``FormatError`` is a
``ValueError`` too, so code written against the reference keeps catching ours.
"""

from __future__ import annotations

from ..errors import ClosedError, ErrorKinds
from ._records import FORMAT_NAME


class ContainerClosedError(ClosedError):
    """The ``Container`` was closed; nothing can be read through it any more (a ValueError, as before)."""


ERRORS = ErrorKinds(FORMAT_NAME)
