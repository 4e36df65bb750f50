"""The bytes of a .kdb (KINO 0.1) file: constants, record tables, errors and
the small variable-length codecs (metadata blob, per-frame step records).

Layout (all little-endian, nothing aligned or padded)::

    [64-byte header][ep 0 meta][ep 0 state/action][ep 0 images]...[N x 64-byte index]

Every offset in the index is an absolute file offset. The exact rules and the
points the original spec leaves open are in ``docs/formats/kdb.md``.
"""

from __future__ import annotations

from typing import NamedTuple

from .._binary import Record

FORMAT_NAME = "kdb"
EXTENSION = ".kdb"
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

class KdbHeader(NamedTuple):
    """The fields of HEADER as ``HEADER.read`` gives them."""

    magic: bytes
    version_major: int
    version_minor: int
    num_episodes: int
    num_frames: int
    index_offset: int
    index_length: int
    created_timestamp: int
    reserved: bytes


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
], size=HEADER_SIZE, tuple_type=KdbHeader)

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
