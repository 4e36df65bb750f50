"""What every format's reader shares: closing, and validation of a file that may not open.

Each format's reader class (``Store``, ``BloscpackFile``, ``KdbFile``,
``Container``) derives from :class:`ReaderBase` and so implements the
``arrayio.Reader`` protocol's closing contract the same way: ``close()``
releases the file and drops every attribute, so any later access (a method,
a property, a plain attribute) raises the format's ``ClosedError`` subclass.
Arrays already handed out keep their pages until dropped.

A format's ``validate(path)`` is :func:`problems_of` over its ``open``: a
file that does not open is a problem, not an exception.

A reader class, and each class of the objects it hands out that read on
demand, is decorated with :func:`names_its_file`, so that every FormatError
it raises starts with the file's name: a loop over a thousand files says
which one is damaged, whichever method found it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, TypeVar

from .errors import ClosedError, FormatError, Problem, file_named

__all__ = ["ReaderBase", "entries_of", "info_of", "names_its_file", "problems_of"]

ReaderClass = TypeVar("ReaderClass", bound=type)

# The special methods through which a reader's data is read; other special methods read nothing.
_READING_SPECIAL_METHODS = frozenset({"__init__", "__getitem__", "__iter__", "__len__", "__contains__", "__array__"})


def names_its_file(file_of: Callable[[Any], str | None], *,
                   naming_itself: tuple[str, ...] = ()) -> Callable[[ReaderClass], ReaderClass]:
    """A class decorator: the FormatErrors that the class's methods, properties and data access raise name
    the file ``file_of(instance)`` (its Source's name) in front of their message. The methods in
    ``naming_itself`` (a hot path, such as a mapping's lookup) name it themselves, where they can fail."""
    def decorate(cls: ReaderClass) -> ReaderClass:
        seen: set[str] = set(naming_itself)
        for owner in cls.__mro__:  # the class's own members and its mixins' (batch reads, entry lines)
            members = {name: member for name, member in vars(owner).items() if name not in seen}
            seen.update(members)
            if owner is ReaderBase or not owner.__module__.startswith(__package__ + "."):
                continue
            for name, member in members.items():
                if name.startswith("_") and name not in _READING_SPECIAL_METHODS:
                    continue
                if isinstance(member, property) and member.fget is not None:
                    setattr(cls, name, property(_naming(member.fget, file_of), member.fset, member.fdel,
                                                member.__doc__))
                elif inspect.isfunction(member):
                    setattr(cls, name, _naming(member, file_of))
        cls.file_name = property(lambda reader: file_named(file_of(reader)),  # type: ignore[attr-defined]
                                 doc="The path or URL the reader's errors name (None for bytes and streams).")
        return cls
    return decorate


def _file_name(file_of: Callable[[Any], str | None], reader: Any) -> str | None:
    try:
        return file_of(reader)  # FormatError.naming leaves out what names no file (<buffer>)
    except Exception:  # noqa: BLE001 - a reader closed, or failed before it held its source: no name to give
        return None


def _naming(function: Callable[..., Any], file_of: Callable[[Any], str | None]) -> Callable[..., Any]:
    if inspect.isgeneratorfunction(function):
        @functools.wraps(function)
        def generator(self: Any, *args: Any, **kwargs: Any) -> Iterator[Any]:
            try:
                yield from function(self, *args, **kwargs)
            except FormatError as error:
                error.naming(_file_name(file_of, self))
                raise
        return generator

    @functools.wraps(function)
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return function(self, *args, **kwargs)
        except FormatError as error:
            error.naming(_file_name(file_of, self))
            raise
    return method


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
