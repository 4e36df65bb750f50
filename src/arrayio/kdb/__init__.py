"""kdb (KINO 0.1): robot-learning episodes in one memory-mappable file.

    with arrayio.kdb.Writer("demo.kdb", compress="jpeg") as writer:
        writer.add_episode(states, actions, images={"front": frames}, task="pick", fps=10)
    with arrayio.kdb.open("demo.kdb") as f:
        episode = f.read_episode(0)          # zero-copy states/actions, lazy images
        frame = f.read_frame(0, 17)          # one frame, images decoded

The byte layout and every decision the original spec leaves open are in
``docs/formats/kdb.md``. This package is the file format only; the robot-learning toolkit (PyTorch
datasets, LeRobot, shards, tools, plots) is :mod:`arrayio.robot`, over the public names below.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .._registry import FormatSpec
from ._batch_reads import IMAGE_TABLE_DTYPE, NO_IMAGE
from ._codec import EpisodeMeta
from ._errors import (
    ERRORS,
    BadMagic,
    EpisodeIdNotFound,
    EpisodeNotFound,
    FileClosedError,
    ImageDecodeError,
    ImageTooLarge,
    InvalidUtf8,
    KinoError,
    MissingImage,
    UnexpectedEof,
    UnsupportedVersion,
)
from ._errors import ERRORS as _ERRORS
from ._frames import ImageRecord
from ._images import JPEG_MAGIC, EncodedImage, check_jpeg_header, check_jpeg_headers, decode_jpeg_into
from ._images import check_decoded_size as check_image_record
from ._images import check_records as check_image_records
from ._images import decode as decode_image
from ._images import encode as encode_image
from ._map import sections as _sections
from ._protocol import demo, open, validate
from ._reader import CameraFrames, Episode, EpisodeImages, Frame, KdbFile
from ._records import EXTENSION, FORMAT_NAME, HEADER_SIZE, INDEX_ENTRY, MAGIC
from ._tree import tree as _tree
from ._writer import Writer

__all__ = [
    "ERRORS",
    "FORMAT_NAME",
    "HEADER_SIZE",
    "IMAGE_TABLE_DTYPE",
    "INDEX_ENTRY",
    "JPEG_MAGIC",
    "NO_IMAGE",
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
    "ImageTooLarge",
    "MissingImage",
    "ImageRecord",
    "InvalidUtf8",
    "KdbFile",
    "KinoError",
    "UnexpectedEof",
    "UnsupportedVersion",
    "Writer",
    "check_image_record",
    "check_image_records",
    "check_jpeg_header",
    "check_jpeg_headers",
    "decode_image",
    "decode_jpeg_into",
    "demo",
    "encode_image",
    "open",
    "validate",
]

# The public names the toolkit reads beyond the reader and the writer: the header and index entry
# sizes, the batched image table's row dtype (and its "no image" row), the JPEG signature and the
# image codec (encode, decode, decode straight into a buffer, and the checks before any pixels).
_TOOLKIT = "arrayio.robot"


def _export_npz(source: Any, target: Any, progress: Callable[[int], None]) -> None:
    """kdb -> .npz for ``arrayio convert``: every episode's arrays, images decoded (the toolkit's
    ``arrayio.robot.convert.export_npz``, found by name when asked: the format never imports the toolkit)."""
    export_npz = importlib.import_module(_TOOLKIT + ".convert").export_npz
    export_npz(source, target, progress=lambda done, total: progress(0))


# This format, as the registry and every view know it.
FORMAT = FormatSpec(FORMAT_NAME, MAGIC, (EXTENSION,), "episodes", "kdb (KINO) 0.1: robot-learning episodes",
                    open=open, demo=demo, tree=_tree, sections=_sections, errors=_ERRORS, module=__name__,
                    exports={"npz": _export_npz})
