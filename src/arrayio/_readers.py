"""What every format's reader shares: closing, and validation of a file that may not open.

Each format's reader class (``Store``, ``BloscpackFile``, ``KdbFile``,
``Container``) derives from :class:`ReaderBase` and so implements the
``arrayio.Reader`` protocol's closing contract the same way: ``close()``
releases the file and drops every attribute, so any later access (a method,
a property, a plain attribute) raises the format's ``ClosedError`` subclass.
Arrays already handed out keep their pages until dropped.

A format's ``validate(path)`` is :func:`problems_of` over its ``open``: a
file that does not open is a problem, not an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from .errors import ClosedError, FormatError, Problem

__all__ = ["ReaderBase", "entries_of", "info_of", "problems_of"]


class ReaderBase:
    """Closing semantics for a format's reader: after ``close()`` every access raises ``closed_error``.

    Subclasses set ``format`` (the registry name) and ``closed_error`` and
    release their resources in ``_release()``.
    """

    format: ClassVar[str]
    closed_error: ClassVar[type[ClosedError]] = ClosedError
    closed_as: tuple[type[ClosedError], str]

    def _release(self) -> None:
        """Free what the reader holds (the map, file handles)."""

    def close(self) -> None:
        """Release the file; every later access raises the format's ClosedError."""
        if self.closed:
            return
        closed_as = (self.closed_error, self.format)
        try:
            self._release()
        finally:
            self.__dict__.clear()
            self.__dict__["closed_as"] = closed_as

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return "closed_as" in self.__dict__

    def __getattr__(self, name: str) -> Any:
        # Only reached when normal lookup fails: after close() the instance attributes are gone,
        # so plain attributes, properties and methods that read them all arrive here.
        closed_as = self.__dict__.get("closed_as")
        if closed_as is not None and not name.startswith("__"):
            error, format_name = closed_as
            needs = "" if name.startswith("_") else f" ({name!r} needs it open)"
            raise error(f"{format_name}: the file is closed{needs}")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


Opener = Callable[[Any], Any]


def info_of(open_reader: Opener, target: Any) -> dict[str, Any]:
    """``open_reader(target).info()``, closing the reader afterwards (the module hooks of the views)."""
    with open_reader(target) as reader:
        return reader.info()


def entries_of(open_reader: Opener, target: Any) -> list[dict[str, Any]]:
    """``open_reader(target).entries()``, closing the reader afterwards (the module hooks of the views)."""
    with open_reader(target) as reader:
        return reader.entries()


def problems_of(open_reader: Opener, target: Any,
                unopenable: Callable[[Any, FormatError], list[Problem]] | None = None,
                **options: Any) -> list[Problem]:
    """``open_reader(target).validate(**options)``; a file that does not open gives its error as the one
    problem (or ``unopenable(target, error)``'s problems, for formats that can say more without opening)."""
    try:
        reader = open_reader(target)
    except FormatError as error:
        return unopenable(target, error) if unopenable is not None else [Problem.from_error(error)]
    with reader:
        return reader.validate(**options)
