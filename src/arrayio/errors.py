"""The one exception hierarchy of arrayio.

    ArrayIOError
      FormatError                 the bytes are not a valid file of the format
        TruncatedError            a range runs past the end of the data
        ChecksumError             a stored checksum does not match the bytes
        VersionError
          VersionTooOldError
          VersionTooNewError
        LimitError                the data declares a size over a limit of arrayio.limits (raisable)
      UnsupportedError            valid request we cannot honour (dtype, codec, ...)
      ClosedError                 the reader was closed (also a ValueError)
      WriteError                  a write, fsync, rename or truncate failed (also an OSError,
                                  with the errno); the message names the operation and the path
      OutputExistsError           an output target exists and replacing it was not asked for
                                  (also a FileExistsError)
      UnsafeNameError             a name read from a file cannot become a path segment
      MissingDependencyError      an optional package is not installed (also an ImportError); the
                                  message names the extra that installs it

``Problem`` is what ``validate()`` returns: one finding, with the same parts a
``FormatError`` carries, less the file (its caller names it). A FormatError met
reading a file starts with the file's path or URL (``error.file``; see
:func:`naming_file`): the readers and the array model's chunk reads name it.
      RemoteError                 a remote object cannot be read as asked (also an OSError)
        ObjectChangedError        the object changed between open and a later read

Format modules that mirror a reference package define that package's exception
names as subclasses of these (kastore's ``FileFormatError`` is a
``FormatError``), and describe them to the shared binary layer with an
:class:`ErrorKinds`, so that errors raised deep in ``_binary`` carry both
identities.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, Iterator, Literal

__all__ = [
    "ArrayIOError",
    "FormatError",
    "TruncatedError",
    "ChecksumError",
    "VersionError",
    "VersionTooOldError",
    "VersionTooNewError",
    "LimitError",
    "UnsupportedError",
    "ConversionWarning",
    "ClosedError",
    "WriteError",
    "OutputExistsError",
    "UnsafeNameError",
    "MissingDependencyError",
    "Problem",
    "RemoteError",
    "ObjectChangedError",
    "ErrorKinds",
    "describe",
    "offsets_from",
    "current_origin",
    "naming_file",
    "file_named",
]

# Where byte 0 of the data being parsed lies in the file: a store read from the
# middle of a file (concatenated stores) reports file offsets, not store offsets.
_ORIGIN: ContextVar[int] = ContextVar("arrayio_error_origin", default=0)


@contextlib.contextmanager
def offsets_from(origin: int) -> Iterator[None]:
    """Within this block, error offsets are shifted by ``origin`` (the data's position in its file)."""
    token = _ORIGIN.set(origin)
    try:
        yield
    finally:
        _ORIGIN.reset(token)


def current_origin() -> int:
    """Where byte 0 of the data being parsed lies in its file (see :func:`offsets_from`)."""
    return _ORIGIN.get()


def describe(value: Any) -> str:
    """Render an expected/found value for an error message (bytes as hex)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        raw = bytes(value)
        shown = raw[:16].hex(" ")
        return shown + (" ..." if len(raw) > 16 else "") if raw else "no bytes"
    return str(value)


class ArrayIOError(Exception):
    """Base class of every error arrayio raises on purpose."""


class FormatError(ArrayIOError, ValueError):
    """The data is not a valid file of the format; the message says where and why.

    Built either from a ready message or from its parts, which are also kept
    as attributes: ``format``, ``field``, ``offset`` (absolute byte offset),
    ``expected`` and ``found``. ``file`` is the name of the file (a path or a URL) once the reader
    that raised it has said which (:meth:`naming`); ``str(error)`` then starts with it, and ``message``
    is the rest.
    """

    file: str | None = None
    message: str

    def __init__(
        self,
        message: str | None = None,
        *,
        format: str | None = None,
        field: str | None = None,
        offset: int | None = None,
        expected: Any = None,
        found: Any = None,
    ) -> None:
        if offset is not None:
            offset += _ORIGIN.get()
        self.format = format
        self.field = field
        self.offset = offset
        self.expected = expected
        self.found = found
        if message is None:
            message = self._compose()
        # An attribute, not a property: torch re-raises a worker's error as ``cls(message=...)`` when the class
        # has a ``message``, which LimitError's arguments do not take.
        self.message = message
        # Not super(): compatibility subclasses also derive from builtins whose __init__ takes other
        # arguments (UnicodeDecodeError); args must hold just the message for all of them.
        Exception.__init__(self, message)

    def _compose(self) -> str:
        parts = [f"{self.format or 'file'}:"]
        if self.field is not None:
            parts.append(self.field)
        if self.offset is not None:
            parts.append(f"at byte {self.offset}")
        text = " ".join(parts)
        if self.expected is not None:
            text += f": expected {describe(self.expected)}"
            if self.found is not None:
                text += f", found {describe(self.found)}"
        elif self.found is not None:
            text += f": found {describe(self.found)}"
        return text

    def naming(self, file: str | None) -> FormatError:
        """This error with ``file`` in front of its message, unless it names a file already or ``file`` is none
        (None, or a stand-in such as ``<buffer>``)."""
        file = file_named(file)
        if self.file is None and file:
            self.file = file
            if self.args:
                self.args = (f"{file}: {self.args[0]}", *self.args[1:])
        return self


def file_named(name: str | None) -> str | None:
    """``name`` where it names a file (a path or a URL); None for none and for the stand-ins of a source with no
    name (``<buffer>``, ``<stream>``, ``<fd>``)."""
    return None if not name or name.startswith("<") else name


class naming_file:  # noqa: N801 - used as a context manager, named as contextlib's are
    """Within this block, a FormatError that names no file yet names ``file`` (see :meth:`FormatError.naming`).

    A class, not a generator: the readers' methods enter it on every call.
    """

    __slots__ = ("file",)

    def __init__(self, file: str | None) -> None:
        self.file = file

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> Literal[False]:
        if isinstance(error, FormatError):
            error.naming(self.file)
        return False


class TruncatedError(FormatError):
    """A header, table or payload range runs past the end of the data."""


class ChecksumError(FormatError):
    """A stored checksum does not match the bytes it covers."""


class VersionError(FormatError):
    """The file's format version is not one this reader handles."""


class VersionTooOldError(VersionError):
    """The file's major version predates the versions we read."""


class VersionTooNewError(VersionError):
    """The file's major version is newer than the versions we read."""


class LimitError(FormatError):
    """The data declares a size over one of :mod:`arrayio.limits`; the message names the limit and how
    to raise it. ``limit`` is its name, ``value`` its value now, ``size`` what the data asked for."""

    limit: str | None
    value: int | None
    size: int | None

    def __init__(self, limit: str, value: int | None = None, size: int | None = None, what: str | None = None, *,
                 format: str | None = None, offset: int | None = None, unit: str = "bytes") -> None:
        if value is None or size is None or what is None:  # rebuilt from its message alone (torch's worker re-raise)
            super().__init__(limit, format=format)
            self.limit = self.value = self.size = None
            return
        where = f"{format}: " if format else ""
        at = f" at byte {offset + _ORIGIN.get()}" if offset is not None else ""
        super().__init__(
            f"{where}{what}{at} needs {size} {unit}, over the limit {limit} = {value} {unit} (raise it with "
            f"arrayio.limits.raised({limit}=...) or the environment variable ARRAYIO_LIMITS={limit}=...)",
            format=format, field=what, expected=f"at most {value} {unit} ({limit})", found=f"{size} {unit}")
        self.offset = None if offset is None else offset + _ORIGIN.get()
        self.limit, self.value, self.size = limit, value, size

    def __reduce__(self) -> Any:
        return (_rebuild_limit_error, (type(self), self.limit, self.value, self.size, self.field, self.format,
                                       self.message, self.file))


def _rebuild_limit_error(cls: type[LimitError], limit: str | None, value: int | None, size: int | None,
                         what: str | None, format: str | None, message: str, file: str | None = None) -> LimitError:
    error = cls(message, format=format)
    error.limit, error.value, error.size, error.field = limit, value, size, what
    error.naming(file)
    return error


class UnsupportedError(ArrayIOError, ValueError):
    """A valid request that this format or build cannot honour."""


class ConversionWarning(UserWarning):
    """A conversion's target cannot hold something the source has (attributes, a matrix type, ...)."""


class ClosedError(ArrayIOError, ValueError):
    """The reader was closed; nothing can be read through it any more."""


class WriteError(ArrayIOError, OSError):
    """An operation of a writer failed; ``errno``, ``strerror`` and ``filename`` are the OS error's.

    ``operation`` is one of "create", "write", "fsync", "truncate", "rename",
    "directory fsync"; ``path`` is the file the user named (for a rename, the
    target), so the message reads "write of /x/y.kas failed: [Errno 28] No
    space left on device".
    """

    def __init__(self, operation: str, path: str, cause: OSError) -> None:
        super().__init__(cause.errno, cause.strerror or str(cause), path)
        self.operation = operation
        self.path = path

    def __str__(self) -> str:
        return f"{self.operation} of {self.path} failed: [Errno {self.errno}] {self.strerror}"

    def __reduce__(self) -> Any:
        return (_rebuild_write_error, (self.operation, self.path, self.errno, self.strerror))


class OutputExistsError(ArrayIOError, FileExistsError):
    """An output target exists and was not to be replaced (``--force`` / ``force=True`` not given),
    or it is something no writer may ever replace (``.``, the source, a folder this tool did not write)."""

    def __str__(self) -> str:
        return str(self.strerror)


class UnsafeNameError(FormatError):
    """A name that came from a file (a key, camera or feature name, a path template) would not stay
    one path segment under its root (``..``, ``/``, NUL, a reserved store name): names are data, not paths."""


class MissingDependencyError(ArrayIOError, ImportError):
    """A feature needs an optional package that is not installed; the message says how to install it."""


def _rebuild_write_error(operation: str, path: str, errno: int, strerror: str) -> WriteError:
    return WriteError(operation, path, OSError(errno, strerror))


@dataclass(frozen=True)
class Problem:
    """One finding of ``validate()``: what is wrong, in which field, at which byte, expected and found."""

    message: str
    field: str | None = None
    offset: int | None = None
    expected: Any = None
    found: Any = None

    def __str__(self) -> str:
        return self.message

    @classmethod
    def from_error(cls, error: ArrayIOError, where: str | None = None) -> Problem:
        """The Problem an error describes (a FormatError's field, offset, expected and found with it);
        ``where`` (e.g. "store 1") prefixes its message. The file's name is left out: a problem belongs to
        the file it was found in, which its caller names."""
        message = error.message if isinstance(error, FormatError) else str(error)
        return cls(message, *(getattr(error, part, None) for part in ("field", "offset", "expected", "found"))
                   ).within(where)

    def within(self, where: str | None) -> Problem:
        """The same finding with ``where`` (e.g. "store 1 (...)") in front of its message."""
        return replace(self, message=f"{where}: {self.message}") if where else self

    def as_dict(self) -> dict[str, Any]:
        """JSON-friendly parts: message, field, offset, and expected/found rendered as in the message."""
        return {"message": self.message, "field": self.field, "offset": self.offset,
                "expected": None if self.expected is None else describe(self.expected),
                "found": None if self.found is None else describe(self.found)}


class RemoteError(ArrayIOError, OSError):
    """A remote object cannot be read as asked (refused connection, HTTP error); names the URL."""


class ObjectChangedError(RemoteError):
    """The remote object's size or ETag changed after it was opened: its bytes would be mixed."""


@dataclass(frozen=True)
class ErrorKinds:
    """The exception classes one format raises, plus its name for messages.

    The defaults are arrayio's own classes; a format that mirrors a reference
    package passes its compatibility subclasses instead.
    """

    format: str
    format_error: type[FormatError] = FormatError
    truncated: type[FormatError] = TruncatedError
    checksum: type[FormatError] = ChecksumError
    too_old: type[FormatError] = VersionTooOldError
    too_new: type[FormatError] = VersionTooNewError

    def invalid(self, field: str, offset: int | None, expected: Any, found: Any = None) -> FormatError:
        """A FormatError naming this format, the field, its byte offset and the expectation."""
        return self.format_error(format=self.format, field=field, offset=offset, expected=expected, found=found)

    def truncated_at(self, what: str, offset: int, length: int, available: int) -> FormatError:
        """A TruncatedError for ``length`` bytes of ``what`` at ``offset`` when only ``available`` exist."""
        origin = _ORIGIN.get()
        return self.truncated(
            f"{self.format}: {what} at byte {origin + offset}: expected {length} bytes "
            f"(up to byte {origin + offset + length}), the data ends at byte {origin + available}",
            format=self.format,
            field=what,
            offset=offset,
            expected=f"{length} bytes",
            found=f"{max(0, available - offset)} bytes",
        )

    def problem(self, field: str, offset: int | None, expected: Any, found: Any = None) -> Problem:
        """A validate() finding that is not an exception, worded exactly as :meth:`invalid` words errors."""
        return Problem.from_error(self.invalid(field, offset, expected, found))

    def checksum_mismatch(self, field: str, offset: int, expected: Any, found: Any) -> FormatError:
        """A ChecksumError for ``field`` at ``offset``."""
        return self.checksum(format=self.format, field=field, offset=offset, expected=expected, found=found)

    def version(self, field: str, offset: int, supported: Any, found: int, newer: bool) -> FormatError:
        """A version error: too new when ``newer`` else too old."""
        cls = self.too_new if newer else self.too_old
        return cls(format=self.format, field=field, offset=offset, expected=supported, found=found)

    def check_magic(self, field: str, offset: int, expected: bytes, found: bytes) -> None:
        """Raise unless the magic bytes ``found`` are ``expected``."""
        if found != expected:
            raise self.invalid(field, offset, expected, found)

    def check_version(self, field: str, offset: int, supported: int, found: int) -> None:
        """Raise VersionTooOld/NewError unless ``found`` is the ``supported`` (major) version."""
        if found != supported:
            raise self.version(field, offset, supported, found, newer=found > supported)
