"""kdb (KINO 0.1): robot-learning episodes in one memory-mappable file.

    with arrayio.kdb.Writer("demo.kdb", compress="jpeg") as writer:
        writer.add_episode(states, actions, images={"front": frames}, task="pick", fps=10)
    with arrayio.kdb.open("demo.kdb") as f:
        episode = f.read_episode(0)          # zero-copy states/actions, lazy images
        frame = f.read_frame(0, 17)          # one frame, images decoded

The byte layout and every decision the original spec leaves open are in
``docs/formats/kdb.md``; the PyTorch datasets live in ``arrayio.kdb.torch``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .._registry import FormatSpec
from ._codec import EpisodeMeta
from ._errors import (
    ERRORS,
    BadMagic,
    EpisodeIdNotFound,
    EpisodeNotFound,
    FileClosedError,
    ImageDecodeError,
    InvalidUtf8,
    KinoError,
    UnexpectedEof,
    UnsupportedVersion,
)
from ._errors import ERRORS as _ERRORS
from ._images import EncodedImage
from ._map import sections as _sections
from ._protocol import demo, entries, info, open, validate
from ._reader import CameraFrames, Episode, EpisodeImages, Frame, ImageRecord, KdbFile
from ._records import EXTENSION, FORMAT_NAME, MAGIC
from ._tree import tree as _tree
from ._writer import Writer

__all__ = [
    "ERRORS",
    "FORMAT_NAME",
    "BadMagic",
    "CameraFrames",
    "EncodedImage",
    "Episode",
    "EpisodeIdNotFound",
    "EpisodeImages",
    "EpisodeMeta",
    "EpisodeNotFound",
    "FileClosedError",
    "Frame",
    "ImageDecodeError",
    "ImageRecord",
    "InvalidUtf8",
    "KdbFile",
    "KinoError",
    "UnexpectedEof",
    "UnsupportedVersion",
    "Writer",
    "demo",
    "entries",
    "info",
    "open",
    "validate",
]

def _export_npz(source: Any, target: Any, progress: Callable[[int], None]) -> None:
    """kdb -> .npz for ``arrayio convert``: every episode's arrays, images decoded (see convert.export_npz)."""
    from .convert import export_npz

    export_npz(source, target, progress=lambda done, total: progress(0))


# This format, as the registry and every view know it.
FORMAT = FormatSpec(FORMAT_NAME, MAGIC, (EXTENSION,), "episodes", "kdb (KINO) 0.1: robot-learning episodes",
                    open=open, demo=demo, tree=_tree, sections=_sections, errors=_ERRORS, module=__name__,
                    exports={"npz": _export_npz})
