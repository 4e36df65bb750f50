"""The bytes of a .kdb (KINO 0.1) file: constants, record tables, errors and
the small variable-length codecs (metadata blob, per-frame step records).

Layout (all little-endian, nothing aligned or padded)::

    [64-byte header][ep 0 meta][ep 0 state/action][ep 0 images]...[N x 64-byte index]

Every offset in the index is an absolute file offset. The exact rules and the
points the original spec leaves open are in ``docs/formats/kdb.md``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._binary import Record
from ..errors import (
    ArrayIOError,
    ErrorKinds,
    FormatError,
    TruncatedError,
    VersionTooNewError,
)

FORMAT_NAME = "kdb"
MAGIC = b"KINO"
VERSION_MAJOR = 0
VERSION_MINOR = 1
HEADER_SIZE = 64
INDEX_ENTRY_SIZE = 64

# Integer widths of the narrowed fields, which the writer range-checks instead of truncating.
U16_MAX = 2**16 - 1
U32_MAX = 2**32 - 1
U8_MAX = 2**8 - 1

# Stored per-image "format" byte: 0 raw pixels, anything else compressed (JPEG or PNG, told apart by magic).
IMAGE_RAW = 0
IMAGE_COMPRESSED = 1

# metadata "success" byte
SUCCESS_UNKNOWN, SUCCESS_FALSE, SUCCESS_TRUE = 0, 1, 2

HEADER = Record("kdb header", [
    ("magic", "4s"),
    ("version_major", "<u2"),
    ("version_minor", "<u2"),
    ("num_episodes", "<u8"),
    ("num_frames", "<u8"),
    ("index_offset", "<u8"),
    ("index_length", "<u8"),
    ("created_timestamp", "<u8"),
    ("reserved", "16s"),
], size=HEADER_SIZE)

INDEX_ENTRY = Record("kdb index entry", [
    ("episode_id", "<u8"),
    ("num_frames", "<u4"),
    ("action_dim", "<u2"),
    ("state_dim", "<u2"),
    ("actions_offset", "<u8"),
    ("actions_length", "<u8"),
    ("images_offset", "<u8"),
    ("images_length", "<u8"),
    ("meta_offset", "<u8"),
    ("meta_length", "<u8"),
], size=INDEX_ENTRY_SIZE)

# Pieces of the variable-length blobs.
STRING_LENGTH = Record("kdb string length", [("length", "<u2")])
META_TAIL = Record("kdb metadata tail", [("fps", "<f4"), ("success", "u1"), ("reward_present", "u1")])
TOTAL_REWARD = Record("kdb metadata total_reward", [("total_reward", "<f4")])
CAMERA_COUNT = Record("kdb frame camera count", [("num_cameras", "<u2")])
IMAGE_HEADER = Record("kdb image header", [
    ("width", "<u4"),
    ("height", "<u4"),
    ("channels", "u1"),
    ("format", "u1"),
    ("data_len", "<u4"),
])

STEP_FIXED_BYTES = 5  # f32 reward + u8 is_terminal after the state and action vectors


class KinoError(FormatError):
    """A malformed .kdb file (the reference's ``KinoError``)."""


class BadMagic(KinoError):
    """The file does not start with ``KINO``."""


class UnexpectedEof(KinoError, TruncatedError):
    """A header, index, blob or image runs past the end of its range (``TooShort``/``UnexpectedEof``)."""


class UnsupportedVersion(KinoError, VersionTooNewError):
    """The file's major version is newer than 0."""


class InvalidUtf8(KinoError):
    """A name in the metadata blob or an image record is not UTF-8."""


class ImageDecodeError(KinoError):
    """A stored image could not be decoded (or its raw size does not match its dimensions)."""


class EpisodeNotFound(ArrayIOError, IndexError):
    """An episode position outside ``0 .. len(file) - 1``."""


class EpisodeIdNotFound(ArrayIOError, KeyError):
    """No episode carries the requested episode id."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


ERRORS = ErrorKinds(FORMAT_NAME, format_error=KinoError, truncated=UnexpectedEof, too_new=UnsupportedVersion)


@functools.lru_cache(maxsize=256)
def step_dtype(state_dim: int, action_dim: int) -> np.dtype:
    """The packed per-frame record: state, action, reward, is_terminal (no padding)."""
    return np.dtype([
        ("state", "<f4", (state_dim,)),
        ("action", "<f4", (action_dim,)),
        ("reward", "<f4"),
        ("is_terminal", "u1"),
    ])


def step_size(state_dim: int, action_dim: int) -> int:
    """Bytes per frame of the state/action section."""
    return 4 * (state_dim + action_dim) + STEP_FIXED_BYTES


@dataclass(frozen=True)
class EpisodeMeta:
    """One episode's metadata blob plus the counts its index entry holds."""

    episode_id: int
    num_frames: int
    state_dim: int
    action_dim: int
    embodiment: str
    task: str
    fps: float
    success: bool | None
    total_reward: float | None

    def as_dict(self) -> dict[str, Any]:
        """The fields as a plain dict (the reference binding's ``read_meta`` shape, plus state_dim)."""
        return dict(self.__dict__)


def decode_meta(blob: memoryview, base: int, where: str) -> tuple[str, str, float, bool | None, float | None]:
    """Parse a metadata blob that starts at absolute offset ``base`` (``where`` names the episode)."""
    position = 0
    texts = []
    for name in ("embodiment", "task"):
        if position + STRING_LENGTH.size > len(blob):
            raise ERRORS.truncated_at(f"{where} metadata.{name}_len", base + position, STRING_LENGTH.size,
                                      base + len(blob))
        (length,) = STRING_LENGTH.unpack(blob, position)
        position += STRING_LENGTH.size
        if position + length > len(blob):
            raise ERRORS.truncated_at(f"{where} metadata.{name}", base + position, length, base + len(blob))
        texts.append(decode_utf8(blob[position:position + length], f"{where} metadata.{name}", base + position))
        position += length
    if position + META_TAIL.size > len(blob):
        raise ERRORS.truncated_at(f"{where} metadata.fps/success/reward_present", base + position, META_TAIL.size,
                                  base + len(blob))
    tail = META_TAIL.unpack(blob, position)
    position += META_TAIL.size
    success = {SUCCESS_FALSE: False, SUCCESS_TRUE: True}.get(tail.success)
    total_reward = None
    if tail.reward_present == 1:
        if position + TOTAL_REWARD.size > len(blob):
            raise ERRORS.truncated_at(f"{where} metadata.total_reward", base + position, TOTAL_REWARD.size,
                                      base + len(blob))
        total_reward = float(TOTAL_REWARD.unpack(blob, position).total_reward)
    return texts[0], texts[1], float(tail.fps), success, total_reward


def encode_meta(embodiment: str, task: str, fps: float, success: bool | None, total_reward: float | None) -> bytes:
    """The metadata blob; raises ValueError for names longer than their u16 length field."""
    parts = []
    for name, text in (("embodiment", embodiment), ("task", task)):
        raw = encode_utf8(text, name, U16_MAX)
        parts.append(STRING_LENGTH.pack(length=len(raw)) + raw)
    code = SUCCESS_UNKNOWN if success is None else (SUCCESS_TRUE if success else SUCCESS_FALSE)
    parts.append(META_TAIL.pack(fps=float(fps), success=code, reward_present=int(total_reward is not None)))
    if total_reward is not None:
        parts.append(TOTAL_REWARD.pack(total_reward=float(total_reward)))
    return b"".join(parts)


def decode_utf8(raw: memoryview, field: str, offset: int) -> str:
    """UTF-8 text of a stored name; invalid bytes raise InvalidUtf8 naming the field."""
    try:
        return str(raw, "utf-8")
    except UnicodeDecodeError as error:
        raise InvalidUtf8(format=FORMAT_NAME, field=field, offset=offset + error.start,
                          expected="UTF-8 text", found=bytes(raw[error.start:error.start + 4])) from None


def encode_utf8(text: str, field: str, limit: int) -> bytes:
    """UTF-8 bytes of ``text``, at most ``limit`` long (the width of its length field)."""
    if not isinstance(text, str):
        raise TypeError(f"kdb: {field} must be a str, got {type(text).__name__}")
    raw = text.encode("utf-8")
    if len(raw) > limit:
        raise ValueError(f"kdb: {field} is {len(raw)} UTF-8 bytes; its length field holds at most {limit}")
    return raw


def check_f32(value: float, field: str) -> float:
    """``value`` as a float that fits an f32 (inf/nan pass through, finite overflow raises)."""
    number = float(value)
    if math.isfinite(number) and abs(number) > float(np.finfo(np.float32).max):
        raise ValueError(f"kdb: {field} = {number} does not fit a 32-bit float")
    return number
