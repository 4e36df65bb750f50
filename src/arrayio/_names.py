"""Names from files are data, never paths.

A camera name, a key, a LeRobot feature name or a path template comes from a
file that arrayio does not trust. Every such name becomes a path segment only
through :func:`path_segment`, and every path built from a file's contents is
checked to stay under its root by :func:`path_under` / :func:`relative_under`.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from urllib.parse import quote

from .errors import UnsafeNameError

__all__ = ["RESERVED_NAMES", "confined", "path_segment", "path_under", "relative_name", "relative_under"]

# Names a store keeps for its own documents: a node of that name would shadow (or be) one.
RESERVED_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})
# Kept as they are when a name is escaped; "%" and "/" never are, so escaping is one to one.
_SAFE = "!$&'()*+,;=:@~ -"
_SEPARATORS = ("/", "\\", "\0")


def _problem(name: str) -> str | None:
    """Why ``name`` cannot be one path segment, or None when it can."""
    if name in ("", ".", ".."):
        return "an empty, '.' or '..' name"
    for separator in _SEPARATORS:
        if separator in name:
            return f"a name with {separator!r} in it"
    if name.lower() in RESERVED_NAMES:
        return f"the reserved store name {name!r}"
    return None


def path_segment(name: str, what: str, *, escape: bool = False) -> str:
    """``name`` as one path segment: unchanged when safe, else refused (UnsafeNameError naming ``what``);
    with ``escape`` every name maps one to one onto a safe percent-escaped segment instead."""
    if not isinstance(name, str):
        raise UnsafeNameError(f"{what}: expected a text name, found {type(name).__name__}")
    if escape:
        escaped = quote(name, safe=_SAFE)
        if escaped in ("", ".", "..") or escaped.lower() in RESERVED_NAMES:
            # "%" alone, or a leading "%2E", can come from no other name: quote() writes "%" as "%25".
            escaped = "%" if not escaped else "%2E" + escaped[1:]
        return escaped
    problem = _problem(name)
    if problem is not None:
        raise UnsafeNameError(f"{what} {name[:80]!r} cannot be a file or folder name: {problem} "
                              "(names read from a file are never used as paths)")
    return name


def _inside(path: str, root: str) -> bool:
    return path == root or os.path.commonpath([path, root]) == root


def path_under(root: str | os.PathLike, *names: str, what: str) -> Path:
    """``root/name/...`` where each name is a :func:`path_segment` (so the path cannot leave ``root``)."""
    return Path(root).joinpath(*(path_segment(name, what) for name in names))


def relative_name(relative: str, what: str) -> str:
    """``relative`` unchanged when, read as a ``/``-separated path, it cannot leave the folder it is joined to
    (a zip member name, a template's expansion); refused when empty, absolute, with a ``..`` part, a drive,
    a backslash or NUL."""
    if not isinstance(relative, str):
        raise UnsafeNameError(f"{what}: expected a relative path, found {type(relative).__name__}")
    if not relative or relative.startswith("/") or ".." in relative.split("/") or "\\" in relative \
            or "\0" in relative or (len(relative) > 1 and relative[1] == ":"):
        raise UnsafeNameError(f"{what} {relative[:120]!r} is not a relative path that stays inside its folder")
    return relative


def relative_under(root: str | os.PathLike, relative: str, what: str) -> Path:
    """A relative path read from a file (a template's expansion) as a path under ``root``: a
    :func:`relative_name` whose file (symlinks followed) lies under ``root``."""
    path = Path(root).joinpath(*PurePosixPath(relative_name(relative, what)).parts)
    return confined(path, root, what)


def confined(path: str | os.PathLike, root: str | os.PathLike, what: str) -> Path:
    """``path`` unchanged when, symlinks followed, it lies under ``root``; else UnsafeNameError."""
    real_root = os.path.realpath(root)
    if not _inside(os.path.realpath(path), real_root):
        raise UnsafeNameError(f"{what} {os.fspath(path)!r} leads outside {os.fspath(root)!r} "
                              "(through '..' or a symbolic link)")
    return Path(path)
