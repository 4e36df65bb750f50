"""Format name -> module, and detection by magic bytes.

Every format module named here offers the same small protocol, which the
top-level functions and the generic CLI commands use:

    open(path)               -> the format's reader (an arrayio.Reader)
    info(path)               -> open(path).info(): dict of JSON-friendly facts about the file
    validate(path)           -> open(path).validate(): list[Problem] (empty = valid); never raises for a bad file
    entries(path)            -> open(path).entries(): list[dict] with at least "name" (for `arrayio ls`)
    cat(path, name, numbers) -> iterator of text lines (for `arrayio cat`; byte text as text unless numbers)
    demo(folder)             -> Path of a small sample file it wrote, read back and checked

``load(path)`` / ``dump(mapping, path)`` are also offered by the formats whose
model is a mapping of names to arrays (``model == "mapping"``), which is what
``arrayio convert`` needs.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from ._sources import RemoteFile, is_remote, is_url, resolve
from .errors import FormatError, Problem, UnsupportedError

__all__ = ["Reader", "FormatSpec", "FORMATS", "ViewSpec", "VIEWS", "detect", "view_of", "module_for",
           "available_formats", "format_for_extension"]


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

    def close(self) -> None:
        """Release the file; later accesses raise ``ClosedError``."""
        ...

    def __enter__(self) -> Any:
        ...

    def __exit__(self, *exc_info: object) -> None:
        ...


@dataclass(frozen=True)
class FormatSpec:
    """What the registry knows of a format before importing its module."""

    name: str
    module: str
    magic: bytes
    extensions: tuple[str, ...]
    model: str
    description: str


FORMATS: dict[str, FormatSpec] = {
    spec.name: spec
    for spec in (
        FormatSpec("kastore", "arrayio.kastore", b"\x89KAS\r\n\x1a\n", (".kas", ".trees"), "mapping",
                   "kastore 1.0: key -> 1-D array"),
        FormatSpec("kast", "arrayio.kast", b"KAST", (".kast",), "mapping",
                   "KAST draft layout: key -> 1-D array"),
        FormatSpec("bloscpack", "arrayio.bloscpack", b"blpk", (".blp",), "array",
                   "bloscpack 3: one Blosc-compressed array or byte stream"),
        FormatSpec("kdb", "arrayio.kdb", b"KINO", (".kdb",), "episodes",
                   "kdb (KINO) 0.1: robot-learning episodes"),
        FormatSpec("pycauset", "arrayio.pycauset", b"PYCAUSET", (".pycauset",), "matrix",
                   "pycauset container 1: one matrix + typed metadata"),
    )
}


@dataclass(frozen=True)
class ViewSpec:
    """A community's layout known by its extension: over one of the formats (tskit's ``.trees`` are kastore
    files) or in a container of its own (tszip's zip). Its module offers the hooks of a format
    (open, info, validate, entries, cat, FORMAT_NAME), so info, ls, cat and validate show what its users
    know; ``map`` and the views of the format underneath see the bytes as before."""

    name: str
    module: str
    magic: bytes
    extensions: tuple[str, ...]
    description: str


VIEWS: dict[str, ViewSpec] = {
    spec.name: spec
    for spec in (
        ViewSpec("tskit", "arrayio.tskit", FORMATS["kastore"].magic, (".trees",),
                 "tskit tree sequence (a kastore file)"),
        ViewSpec("tszip", "arrayio.tszip", b"PK\x03\x04", (".tsz",),
                 "tszip: a tree sequence's columns as Zarr v2 arrays in a zip"),
    )
}

_LONGEST_MAGIC = max(len(magic) for magic in [*(spec.magic for spec in FORMATS.values()),
                                               *(spec.magic for spec in VIEWS.values())])


def _head(target: Any) -> bytes:
    if isinstance(target, RemoteFile):  # the first request's bytes, kept for the reader that follows
        return bytes(target.read(0, min(_LONGEST_MAGIC, target.size)))
    if is_url(target) or is_remote(target):
        return _head(resolve(target))
    if isinstance(target, (bytes, bytearray, memoryview)):
        return bytes(target[:_LONGEST_MAGIC])
    if isinstance(target, (str, os.PathLike)) or isinstance(target, bytes):
        with open(target, "rb") as handle:
            return handle.read(_LONGEST_MAGIC)
    if hasattr(target, "read") and hasattr(target, "seek"):
        position = target.tell()
        try:
            return target.read(_LONGEST_MAGIC)
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


def module_for(name: str) -> ModuleType:
    """Import and return the module of format ``name``."""
    if name not in FORMATS:
        raise UnsupportedError(f"unknown format {name!r}; known: {', '.join(FORMATS)}")
    try:
        return importlib.import_module(FORMATS[name].module)
    except ImportError as error:
        raise UnsupportedError(f"format {name!r} is not available in this installation: {error}") from None


def available_formats() -> list[str]:
    """Names of the formats whose modules import in this installation."""
    names = []
    for name in FORMATS:
        try:
            module = module_for(name)
        except UnsupportedError:
            continue
        if not hasattr(module, "demo"):
            continue
        names.append(name)
    return names


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
        if suffix in spec.extensions and _head(target).startswith(spec.magic):
            return spec.name
    return None


def module_of_file(target: Any) -> ModuleType:
    """The module of the view or format detected in ``target``; a clear error when nothing matches."""
    view = view_of(target)
    if view is not None:
        return importlib.import_module(VIEWS[view].module)
    name = detect(target)
    if name is None:
        shown = (target.name if isinstance(target, RemoteFile)
                 else os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else "data")
        head = _head(target)
        raise FormatError(f"{shown}: not a file of any known format (magic bytes {head[:8].hex(' ') or 'none'})",
                          field="magic", offset=0, expected=" or ".join(repr(spec.magic) for spec in FORMATS.values()),
                          found=head[:8])
    return module_for(name)
