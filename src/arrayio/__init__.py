"""arrayio: read, write, inspect and validate small mmap-friendly binary array containers.

Formats: kastore (.kas), kast (.kast), bloscpack (.blp), kdb (.kdb) and the
pycauset container (.pycauset). Each lives in its own module
(``arrayio.kastore`` ...); the functions here dispatch on the magic bytes.
"""

from __future__ import annotations

from typing import Any

from . import errors, limits
from ._edge import remote_target
from ._registry import FORMATS, Reader, available_formats, detect, module_of_file, spec_of_file, view_of
from ._sources import RemoteFile, SourceStats
from .errors import (
    ArrayIOError,
    ChecksumError,
    ClosedError,
    FormatError,
    LimitError,
    MissingDependencyError,
    ObjectChangedError,
    Problem,
    RemoteError,
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
    "limits",
    "LimitError",
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
    "MissingDependencyError",
    "Problem",
    "Reader",
    "RemoteError",
    "ObjectChangedError",
    "RemoteFile",
    "SourceStats",
]


def open(path: Any, storage_options: dict | None = None) -> Reader:  # noqa: A001 - mirrors builtins.open on purpose
    """Open a file of any supported format (a path, bytes, a URL or an fsspec file) and return its reader.

    A URL is detected and opened from the same first response; ``storage_options``
    go to its fsspec filesystem.
    """
    target = remote_target(path, storage_options)
    return module_of_file(target).open(target)


def info(path: Any, storage_options: dict | None = None) -> dict:
    """Facts about a file of any supported format, as a JSON-friendly dict (keys: docs/cli.md)."""
    target = remote_target(path, storage_options)
    if view_of(target) is not None:  # a community's layout (tskit's .trees) answers with what its users know
        return module_of_file(target).info(target)
    with spec_of_file(target).open(target) as reader:
        return reader.info()


def validate(path: Any, storage_options: dict | None = None) -> list[Problem]:
    """Problems found in a file of any supported format (empty list: valid)."""
    try:
        target = remote_target(path, storage_options)
        module = module_of_file(target)
    except FormatError as error:
        return [Problem.from_error(error)]
    return module.validate(target)


def formats() -> list[str]:
    """Names of the formats available in this installation."""
    return available_formats()
