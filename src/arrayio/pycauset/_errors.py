"""The error kinds of the pycauset container.

pycauset 0.6.1 raises plain ``ValueError`` for bad files; ``FormatError`` is a
``ValueError`` too, so code written against the reference keeps catching ours.
"""

from __future__ import annotations

from ..errors import ErrorKinds
from ._records import FORMAT_NAME

ERRORS = ErrorKinds(FORMAT_NAME)
