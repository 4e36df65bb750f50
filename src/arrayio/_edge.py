"""The edge: where what a caller gave becomes bytes to read or an output to publish.

Readers and writers never ask whether a target is a URL: an entry point calls
:func:`open_source` once (a local path is mapped, bytes wrapped, a file
object read in ranges, a URL or fsspec file read through the remote
transports of ``_sources``) and :func:`open_output` / :func:`open_output_folder`
to publish (a local file by temp file and rename, a folder by building it
beside the target and renaming it in, a remote object by one upload).

The output contract, the same for every writer:

* an existing target is replaced only with ``force`` (the Python API defaults
  to replacing, as the reference packages do; the CLI asks for ``--force``);
* a folder is replaced only when ``replaces(folder)`` recognises it as one this
  tool wrote, and never when it is ``.``, the working folder or one of its
  parents, a source, or a folder holding a source;
* a symlink at the target is replaced itself, never followed;
* an interrupted run leaves nothing, and what a killed run left beside the
  target is cleared by the next run to the same target.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

from . import _sources
from ._binary import Source, _write_error_class, atomic_folder, is_path, output_stream
from ._remote._settings import checked_options
from .errors import ErrorKinds, OutputExistsError, UnsupportedError

__all__ = ["FORCE_HINT", "check_output", "is_local", "local_path", "open_output", "open_output_folder", "open_source",
           "options_for", "remote_source", "remote_target"]

FORCE_HINT = "--force (force=True in Python) replaces it"
_DEFAULT_ERRORS = ErrorKinds("file")


def is_local(target: Any) -> bool:
    """True for what names a local file: a path, or a ``file://`` URL."""
    if isinstance(target, str) and _sources.is_url(target):
        return _sources._local_path(target) is not None
    return is_path(target)


def local_path(target: Any) -> str | None:
    """The local path ``target`` names (a path, or a ``file://`` URL), else None."""
    if isinstance(target, str) and _sources.is_url(target):
        return _sources._local_path(target)
    return os.fsdecode(target) if is_path(target) else None


def remote_target(target: Any, storage_options: dict | None = None) -> Any:
    """A ``RemoteFile`` for a URL or an fsspec file (opened once, shared by detection and the reader), the path
    of a ``file://`` URL, anything else unchanged; ``storage_options`` apply to URLs and fsspec files only."""
    return _sources.resolve(target, storage_options)


def open_source(target: Any, errors: ErrorKinds = _DEFAULT_ERRORS, storage_options: dict | None = None) -> Source:
    """The one way in: a Source over a local path (mapped), bytes, an array, a seekable file object, or a URL,
    fsspec file or ``RemoteFile`` (read in cached ranges). ``errors`` names the format's exceptions."""
    remote = remote_source(target, errors, storage_options)
    return remote if remote is not None else Source.open(remote_target(target), errors)


def options_for(target: Any, storage_options: dict | None) -> dict | None:
    """``storage_options`` when ``target`` is read through a remote transport, else None: a list of sources
    may mix local paths and URLs, and the options belong to the URLs."""
    checked_options(storage_options)  # a wrong kind is said even where a local target would not use it
    return storage_options if storage_options and _sources.is_remote(target) else None


def remote_source(target: Any, errors: ErrorKinds, storage_options: dict | None = None) -> Source | None:
    """The Source of a URL, fsspec file or ``RemoteFile``; None for a local target (a path, fd or stream that
    the caller reads its own way, e.g. from a file position). ``storage_options`` apply to URLs only."""
    if _sources.is_remote(target):
        return _sources.open_remote_source(target, errors, storage_options)
    if checked_options(storage_options):
        raise TypeError(f"storage_options apply to URLs and fsspec files, not to {type(target).__name__}")
    return None


# --------------------------------------------------------------------------- outputs

def _same_file(first: Path, second: Path) -> bool:
    with contextlib.suppress(OSError):
        return os.path.samefile(first, second)
    return False


def _source_paths(sources: Iterable[Any]) -> list[Path]:
    paths = (local_path(source) for source in sources if isinstance(source, (str, os.PathLike)))
    return [Path(os.path.realpath(path)) for path in paths if path]


def _refuse(target: Any, reason: str) -> OutputExistsError:
    return OutputExistsError(errno.EEXIST, reason, os.fsdecode(target))


def check_output(target: Any, *, force: bool = True, sources: Iterable[Any] = (), folder: bool = False,
                 replaces: Callable[[Path], bool] | None = None, storage_options: dict | None = None) -> bool:
    """Check that ``target`` may be written (raises OutputExistsError naming the way to replace it, or why it
    never may be); returns whether something is there to be replaced. A URL is only checked for existence."""
    if not is_local(target):
        if not force and _sources.is_remote(target):
            remote = target if isinstance(target, _sources.RemoteFile) or not storage_options else \
                _sources.RemoteFile(target, storage_options)
            _refuse_existing_object(remote)
        return False
    name = local_path(target) or ""
    if name == "":
        raise _write_error_class(FileNotFoundError)("create", name, OSError(errno.ENOENT, "No such file or directory"))
    path = Path(name)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        info = None
    # The folder the name leads to, symlinks followed, for the checks that compare folders.
    real = Path(os.path.realpath(path))
    cwd = Path(os.path.realpath(os.getcwd()))
    if path.name in ("", ".", "..") or real == cwd or real in cwd.parents:
        raise _refuse(name, f"{name} is the working folder or one of its parents; it is never an output")
    for source in _source_paths(sources):
        if real == source or _same_file(path, source):
            raise _refuse(name, f"{name} is the source; write to another name")
        if real in source.parents:
            raise _refuse(name, f"{name} holds the source {source}; it is never an output")
    if info is None:
        return False
    if stat.S_ISLNK(info.st_mode):
        kind = "a symbolic link"
    elif stat.S_ISDIR(info.st_mode):
        kind = "a folder"
    elif stat.S_ISREG(info.st_mode):
        kind = "a file"
    else:  # a FIFO, a device: written into, not replaced
        return False
    if not force:
        raise _refuse(name, f"{name} already exists ({kind}); {FORCE_HINT}")
    if stat.S_ISDIR(info.st_mode):
        if not folder:  # what kastore and open() raise for a folder
            raise _write_error_class(IsADirectoryError)("create", name, OSError(errno.EISDIR, "Is a directory"))
        if replaces is None or not replaces(path):
            raise _refuse(name, f"{name} is a folder this tool did not write; it is never replaced, even with --force")
    return True


@contextlib.contextmanager
def open_output(target: Any, storage_options: dict | None = None, *, force: bool = True,
                sources: Iterable[Any] = ()) -> Iterator[BinaryIO]:
    """The one way to publish a file: a binary stream whose bytes become ``target`` only when the block ends
    without an error (a local path by temp file, fsync and rename; a URL, fsspec file or ``RemoteFile`` by one
    upload; an fd or file object is written into). ``force=False`` refuses an existing target."""
    if _sources.is_remote(target):
        remote = target if isinstance(target, _sources.RemoteFile) or not checked_options(storage_options) else \
            _sources.RemoteFile(target, storage_options)
        check_output(remote, force=force)
        with _sources.remote_output(remote) as stream:
            yield stream
        return
    if checked_options(storage_options):
        raise TypeError(f"storage_options apply to URLs and fsspec files, not to {type(target).__name__}")
    local = local_path(target)
    if local is not None:
        target = local
        check_output(target, force=force, sources=sources)
    with output_stream(target) as stream:
        yield stream


def _refuse_existing_object(target: Any) -> None:
    fs, path, url = _sources._target_fs(target)
    if fs.exists(path):
        raise _refuse(url, f"{url} already exists; {FORCE_HINT}")


@contextlib.contextmanager
def open_output_folder(target: Any, *, replaces: Callable[[Path], bool], force: bool = True,
                       sources: Iterable[Any] = ()) -> Iterator[Path]:
    """The one way to publish a local folder: yields a path to build it at, beside ``target``, renamed in
    when the block ends without an error. An existing ``target`` is replaced only with ``force`` and only
    when ``replaces(target)`` recognises it as a folder this tool wrote (or it is a file)."""
    local = local_path(target)
    if local is None:
        raise UnsupportedError(f"{target}: folder outputs are local folders, not URLs")
    target = local
    replace = check_output(target, force=force, sources=sources, folder=True, replaces=replaces)
    with atomic_folder(target, replace=replace) as building:
        yield building
