"""Format name -> module, and detection by magic bytes.

Every format module named here offers the same small protocol, which the
top-level functions and the generic CLI commands use:

    open(path)               -> the format's reader (an arrayio.Reader)
    info(path)               -> open(path).info(): dict of JSON-friendly facts about the file
    validate(path)           -> open(path).validate(): list[Problem] (empty = valid); never raises for a bad file
    entries(path)            -> open(path).entries(): list[dict] with at least "name" (for `arrayio ls`)
    demo(folder)             -> Path of a small sample file it wrote, read back and checked

``load(path)`` / ``dump(mapping, path)`` are also offered by the formats whose
model is a mapping of names to arrays (``model == "mapping"``), which is what
``arrayio convert`` needs.
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

__all__ = ["Reader", "FormatSpec", "FORMATS", "detect", "module_for", "spec_for", "spec_of_file", "available_formats",
           "format_for_extension", "module_of_file"]


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

    def cat(self, name: str) -> Iterator[str]:
        """What ``arrayio cat`` prints of entry ``name``, a line at a time; KeyError when there is none."""
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


def _longest_magic() -> int:
    return max(len(spec.magic) for spec in FORMATS.values())


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


def module_of_file(target: Any) -> ModuleType:
    """The package of the format detected in ``target``; a clear error when nothing matches."""
    return module_for(spec_of_file(target).name)


def spec_of_file(target: Any) -> FormatSpec:
    """The spec of the format detected in ``target``; a clear error when nothing matches."""
    name = detect(target)
    if name is None:
        shown = (target.name if isinstance(target, RemoteFile)
                 else os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else "data")
        head = _head(target)
        raise FormatError(f"{shown}: not a file of any known format (magic bytes {head[:8].hex(' ') or 'none'})",
                          field="magic", offset=0, expected=" or ".join(repr(spec.magic) for spec in FORMATS.values()),
                          found=head[:8])
    return spec_for(name)
