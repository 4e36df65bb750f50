"""arrayio: read, write, inspect and validate small mmap-friendly binary array containers.

Formats: kastore (.kas), kast (.kast), bloscpack (.blp), kdb (.kdb) and the
pycauset container (.pycauset). Each lives in its own module
(``arrayio.kastore`` ...); the functions here dispatch on the magic bytes.
"""

from __future__ import annotations

from typing import Any

from . import errors
from ._registry import FORMATS, Reader, available_formats, detect, module_of_file
from .errors import (
    ArrayIOError,
    ChecksumError,
    ClosedError,
    FormatError,
    Problem,
    TruncatedError,
    UnsupportedError,
    VersionError,
    VersionTooNewError,
    VersionTooOldError,
    WriteError,
)

__version__ = "0.1.0"

__all__ = [
    "open",
    "detect",
    "info",
    "validate",
    "formats",
    "FORMATS",
    "errors",
    "ArrayIOError",
    "FormatError",
    "TruncatedError",
    "ChecksumError",
    "VersionError",
    "VersionTooOldError",
    "VersionTooNewError",
    "UnsupportedError",
    "ClosedError",
    "WriteError",
    "Problem",
    "Reader",
]


def open(path: Any) -> Reader:  # noqa: A001 - the library's entry point mirrors builtins.open on purpose
    """Open a file of any supported format and return that format's reader (an ``arrayio.Reader``)."""
    return module_of_file(path).open(path)


def info(path: Any) -> dict:
    """Facts about a file of any supported format, as a JSON-friendly dict (keys: docs/cli.md)."""
    return module_of_file(path).info(path)


def validate(path: Any) -> list[Problem]:
    """Problems found in a file of any supported format (empty list: valid)."""
    try:
        module = module_of_file(path)
    except FormatError as error:
        return [Problem.from_error(error)]
    return module.validate(path)


def formats() -> list[str]:
    """Names of the formats available in this installation."""
    return available_formats()
