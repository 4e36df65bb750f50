"""The temporary files and folders beside a target: their names, their mode, and clearing what killed runs left.

A temporary file or folder beside a target is named ``.<target>.<pid>.arrayio.<random>.tmp``, so that
a later run recognises what a killed run left by its name and by its process, which no longer runs.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Literal, Union

import numpy as np

__all__ = ["clear_leftovers", "creation_mode", "spool_array", "temp_prefix"]

PathLike = Union[str, bytes, os.PathLike]


def _umask_now() -> int | None:
    """The process umask read from /proc (Linux 4.7+), or None where it cannot be read that way."""
    with contextlib.suppress(OSError, ValueError, IndexError), \
            open("/proc/self/status", encoding="ascii", errors="replace") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    return None


def _umask_at_import() -> int:
    # Setting the umask to read it is process-wide: done once, here, before any writer thread exists.
    found = _umask_now()
    if found is not None:
        return found
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


_UMASK_AT_IMPORT = _umask_at_import()


def creation_mode() -> int:
    """The mode a new file gets (0666 less the umask), read without ever changing the umask."""
    umask = _umask_now()
    return 0o666 & ~(_UMASK_AT_IMPORT if umask is None else umask)


_TEMP_MARK = "arrayio"


def temp_prefix(final: Path) -> str:
    """The name start of a temporary file or folder beside ``final``: ``.<name>.<pid>.arrayio.``."""
    return f".{final.name}.{os.getpid()}.{_TEMP_MARK}."


def _process_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True  # someone else's process (or not a pid we can ask about): leave its files alone
    return True


def clear_leftovers(final: PathLike) -> list[str]:
    """Remove the temporary files and folders that killed runs writing ``final`` left beside it
    (recognised by their name and a process that no longer runs); returns their names."""
    final = Path(os.fsdecode(final))
    pattern = re.compile(rf"\.{re.escape(final.name)}\.(\d+)\.{_TEMP_MARK}\.[A-Za-z0-9_]+\.tmp")
    removed: list[str] = []
    try:
        entries = list(os.scandir(final.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name)
        if match is None or _process_alive(int(match.group(1))):
            continue
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)
        removed.append(entry.name)
    return removed


def spool_array(folder: PathLike, shape: tuple[int, ...], dtype: Any, order: Literal["C", "F"] = "C") -> np.ndarray:
    """A writable array of ``shape`` mapped from a file in ``folder`` that is unlinked at once (the map keeps
    its pages, so nothing is left behind, even by a killed run); a plain array when it holds no bytes."""
    if math.prod(shape) * np.dtype(dtype).itemsize == 0:
        return np.zeros(shape, dtype=dtype, order=order)
    handle, name = tempfile.mkstemp(prefix=".spool.", dir=os.fsdecode(folder))
    os.close(handle)
    try:
        return np.memmap(name, dtype=dtype, mode="w+", shape=shape, order=order)
    finally:
        os.unlink(name)
