"""The registry: format name -> FormatSpec, built from the format packages, and detection by magic bytes.

Each package in ``_PACKAGES`` declares ``FORMAT = FormatSpec(...)`` at the bottom of its
``__init__``; nothing about a format is written here but its registry line. What the
CLI and the views need of a file they get from the spec (``open``, ``tree``, ``sections``,
``demo``) and from the reader it opens (the :class:`Reader` protocol: ``info``,
``validate``, ``entries``, ``cat``). A format's module keeps ``validate(path)``, which
also judges files that do not open.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from ._sources import RemoteFile, is_remote, is_url, resolve
from .errors import ErrorKinds, FormatError, Problem, UnsupportedError

__all__ = ["Reader", "FormatSpec", "FORMATS", "ViewSpec", "VIEWS", "detect", "view_of", "module_for", "spec_for",
           "spec_of_file", "available_formats", "format_for_extension", "module_of_file"]


@runtime_checkable
class Reader(Protocol):
    """What ``arrayio.open`` returns for every format; each format's reader class implements it.

    After ``close()`` every access raises ``arrayio.ClosedError`` (the classes
    derive from ``_readers.ReaderBase``, which does that). Each format keeps
    its native API on top (kastore's Mapping, bloscpack slicing, kdb episodes,
    pycauset ``.array``). The info keys are listed in docs/cli.md.
    """

    format: str

    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        ...

    def info(self) -> dict[str, Any]:
        """Facts about the file: ``format``, ``version``, ``file_size``, ``summary``, then the format's own."""
        ...

    def validate(self) -> list[Problem]:
        """Every problem found in the file (empty: valid)."""
        ...

    def entries(self) -> list[dict[str, Any]]:
        """What ``arrayio ls`` lists: one dict per key, chunk, episode or part, each with a ``name``."""
        ...

    def cat(self, name: str, numbers: bool = False) -> Iterator[str]:
        """What ``arrayio cat`` prints of entry ``name``, a line at a time (byte text as text unless
        ``numbers``); KeyError when there is none."""
        ...

    def close(self) -> None:
        """Release the file; later accesses raise ``ClosedError``."""
        ...

    def __enter__(self) -> Any:
        ...

    def __exit__(self, *exc_info: object) -> None:
        ...


@dataclass(frozen=True)
class FormatSpec:
    """Everything the library knows of a format, declared once at the bottom of its package's ``__init__``.

    ``open(target)`` returns its :class:`Reader`; ``demo(folder)`` writes,
    reads back and checks a small sample file and returns its path;
    ``tree(reader)`` describes the open file in the array model
    (``arrayio._tree``); ``sections(source)`` lists its byte sections for
    ``arrayio map``; ``errors`` is its :class:`~arrayio.errors.ErrorKinds`.
    ``model`` names what it holds (mapping, array, episodes, matrix).
    ``save(values, target, attributes)`` writes a new file from model values
    (a mapping of key -> 1-D array, or one array, and that array's attributes)
    for ``arrayio convert``; ``exports`` maps a format this one converts to
    itself (its own layout of the data) to ``export(source, target, progress)``.
    """

    name: str
    magic: bytes
    extensions: tuple[str, ...]
    model: str
    description: str
    open: Callable[..., Any]
    demo: Callable[[Path], Path]
    tree: Callable[[Any], Any]
    sections: Callable[[Any], Any]
    errors: ErrorKinds
    module: str
    save: Callable[[Any, Any, dict], None] | None = None
    exports: Mapping[str, Callable[[Any, Any, Callable[[int], None]], None]] = field(default_factory=dict)


# The registry: one line per format, naming the package whose ``FORMAT`` spec describes it.
_PACKAGES = {
    "kastore": "arrayio.kastore",
    "kast": "arrayio.kast",
    "bloscpack": "arrayio.bloscpack",
    "kdb": "arrayio.kdb",
    "pycauset": "arrayio.pycauset",
}


class _Specs(Mapping[str, FormatSpec]):
    """Format name -> FormatSpec of every package that imports here, read from the packages on first use."""

    def __init__(self) -> None:
        self._specs: dict[str, FormatSpec] | None = None
        self.missing: dict[str, str] = {}

    def _loaded(self) -> dict[str, FormatSpec]:
        if self._specs is None:
            specs = {}
            for name, package in _PACKAGES.items():
                try:
                    specs[name] = importlib.import_module(package).FORMAT
                except ImportError as error:  # an optional dependency of that format is missing
                    self.missing[name] = str(error)
            self._specs = specs
        return self._specs

    def __getitem__(self, name: str) -> FormatSpec:
        return self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


FORMATS = _Specs()


@dataclass(frozen=True)
class ViewSpec:
    """A community's layout known by its extension: over one of the formats (tskit's ``.trees`` are kastore
    files, ``over`` names it) or in a container of its own (tszip's zip, with its own ``magic``). Its module
    offers the hooks of a format (open, info, validate, entries, cat, FORMAT_NAME), so info, ls, cat and
    validate show what its users know; ``map`` and the views of the format underneath see the bytes as before."""

    name: str
    module: str
    magic: bytes | None
    extensions: tuple[str, ...]
    description: str
    over: str | None = None

    @property
    def leading_bytes(self) -> bytes:
        """The bytes a file of this view starts with: its own magic, or that of the format it views."""
        return self.magic if self.magic is not None else FORMATS[str(self.over)].magic


VIEWS: dict[str, ViewSpec] = {
    spec.name: spec
    for spec in (
        ViewSpec("tskit", "arrayio.tskit", None, (".trees",), "tskit tree sequence (a kastore file)",
                 over="kastore"),
        ViewSpec("tszip", "arrayio.tszip", b"PK\x03\x04", (".tsz",),
                 "tszip: a tree sequence's columns as Zarr v2 arrays in a zip"),
    )
}


def _longest_magic() -> int:
    return max(len(magic) for magic in [*(spec.magic for spec in FORMATS.values()),
                                        *(spec.leading_bytes for spec in VIEWS.values())])


def _head(target: Any) -> bytes:
    if isinstance(target, RemoteFile):  # the first request's bytes, kept for the reader that follows
        return bytes(target.read(0, min(_longest_magic(), target.size)))
    if is_url(target) or is_remote(target):
        return _head(resolve(target))
    if isinstance(target, (bytes, bytearray, memoryview)):
        return bytes(target[:_longest_magic()])
    if isinstance(target, (str, os.PathLike)) or isinstance(target, bytes):
        with open(target, "rb") as handle:
            return handle.read(_longest_magic())
    if hasattr(target, "read") and hasattr(target, "seek"):
        position = target.tell()
        try:
            return target.read(_longest_magic())
        finally:
            target.seek(position)
    raise TypeError(f"expected a path, bytes or a seekable binary file, got {type(target).__name__}")


def detect(target: Any) -> str | None:
    """Name the format of a path, bytes or seekable file from its magic bytes (None if unknown)."""
    head = _head(target)
    for spec in FORMATS.values():
        if head.startswith(spec.magic):
            return spec.name
    return None


def spec_for(name: str) -> FormatSpec:
    """The spec of format ``name``; UnsupportedError when it is unknown or does not import here."""
    if name not in FORMATS:
        if name in FORMATS.missing:
            raise UnsupportedError(f"format {name!r} is not available in this installation: "
                                   f"{FORMATS.missing[name]}")
        raise UnsupportedError(f"unknown format {name!r}; known: {', '.join(FORMATS)}")
    return FORMATS[name]


def module_for(name: str) -> ModuleType:
    """Import and return the package of format ``name``."""
    return importlib.import_module(spec_for(name).module)


def available_formats() -> list[str]:
    """Names of the formats whose modules import in this installation."""
    return list(FORMATS)


def format_for_extension(path: Any) -> str:
    """The format that owns the extension of ``path`` (for writing new files)."""
    suffix = os.path.splitext(os.fsdecode(path))[1].lower()
    for spec in FORMATS.values():
        if suffix in spec.extensions:
            return spec.name
    raise UnsupportedError(f"no format uses the extension {suffix or '(none)'!r} of {os.fsdecode(path)}")


def view_of(target: Any) -> str | None:
    """The view whose extension ``target`` (a path, URL or RemoteFile) has and whose magic its bytes start with."""
    if isinstance(target, RemoteFile):
        shown = target.name
    elif isinstance(target, (str, os.PathLike)):
        shown = os.fsdecode(target)
    else:
        return None
    suffix = os.path.splitext(shown.split("?")[0])[1].lower()
    for spec in VIEWS.values():
        if suffix in spec.extensions and _head(target).startswith(spec.leading_bytes):
            return spec.name
    return None


def module_of_file(target: Any) -> ModuleType:
    """The module of the view or format detected in ``target``; a clear error when nothing matches."""
    view = view_of(target)
    if view is not None:
        return importlib.import_module(VIEWS[view].module)
    return module_for(spec_of_file(target).name)


def spec_of_file(target: Any) -> FormatSpec:
    """The spec of the format detected in ``target``; a clear error when nothing matches."""
    name = detect(target)
    if name is None:
        shown = (target.name if isinstance(target, RemoteFile)
                 else os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else "data")
        head = _head(target)
        raise FormatError(f"not a file of any known format (magic bytes {head[:8].hex(' ') or 'none'})",
                          field="magic", offset=0, expected=" or ".join(repr(spec.magic) for spec in FORMATS.values()),
                          found=head[:8]).naming(shown)
    return spec_for(name)
