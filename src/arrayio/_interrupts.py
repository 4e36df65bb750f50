"""A Ctrl-C that Python dropped still stops what is being written.

Python raises KeyboardInterrupt wherever the main thread is when the signal arrives. In a finalizer or a
weakref callback (zarr and fsspec run many) it reports "Exception ignored in ..." and carries on, so a
command told to stop would finish and publish its output. The CLI notes such an interrupt here while a
command runs. From then until the command ends, arrayio's writes, renames and uploads raise
KeyboardInterrupt, so nothing is published and what was staged is removed as for any other failure.
"""

from __future__ import annotations

import threading

_dropped = threading.Event()


def note_dropped_interrupt() -> None:
    """Record a KeyboardInterrupt that Python reported and dropped."""
    _dropped.set()


def forget_dropped_interrupt() -> None:
    """Clear the note, once the command it stopped has ended."""
    _dropped.clear()


def refuse_after_interrupt() -> None:
    """KeyboardInterrupt once a dropped one was noted: called before each write, rename or upload."""
    if _dropped.is_set():
        raise KeyboardInterrupt
