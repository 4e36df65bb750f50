"""The image section of a .kdb episode, frame by frame: where each frame's records start, and what they say.

Image records are variable-length, so the start of each frame is found by
walking the records before it, once, as far as the frame asked for, and cached.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from ._codec import decode_utf8
from ._errors import ERRORS
from ._records import CAMERA_COUNT, IMAGE_HEADER, IMAGE_RAW, STRING_LENGTH

__all__ = ["FrameWalk", "ImageRecord", "parse_frame"]

_READ_U16 = STRING_LENGTH.field_unpacker("length")
_READ_DATA_LEN = IMAGE_HEADER.field_unpacker("data_len")
_DATA_LEN_AT = IMAGE_HEADER.offsets["data_len"]
_READ_IMAGE_HEADER = IMAGE_HEADER.unpack_plain


class ImageRecord(NamedTuple):
    """Where one camera image of one frame sits, and what its record says about it."""

    camera: str
    width: int
    height: int
    channels: int
    format: int
    offset: int
    length: int

    @property
    def compressed(self) -> bool:
        """True for a non-zero format byte (JPEG or PNG, told apart by magic)."""
        return self.format != IMAGE_RAW


class FrameWalk:
    """Finds where each frame's image records start inside one episode's image section.

    Records are variable-length, so a frame is found by walking the records
    before it (reading only the name lengths and data lengths, bounds-checked)
    as far as the frame asked for; the starts found are cached, so each
    record is walked at most once per open file. ``section`` holds the first
    bytes of the section (all of them for a mapped file); the walk asks
    ``read_head`` for more when a record runs past them.
    """

    def __init__(self, position: int, start: int, size: int, num_frames: int,
                 read_head: Callable[[int], memoryview], wanted: int) -> None:
        self.position = position
        self.start = start
        self.size = size
        self.num_frames = num_frames
        self.read_head = read_head
        self.wanted = wanted
        self.section = read_head(wanted)
        self.extended = False
        self.starts = [0]
        self.names: dict[bytes, str] = {}

    def extend(self, needed: int) -> memoryview:
        """The section's first ``needed`` bytes or more: up to ``wanted`` the first time, when that covers them;
        else all (a walk reading frame after frame would otherwise fetch each one on its own)."""
        whole = needed > self.wanted or self.extended
        self.extended = True
        self.section = self.read_head(self.size if whole else self.wanted)
        return self.section

    def frame_start(self, frame: int) -> int:
        """Offset of ``frame`` (``num_frames``: the end of the last frame) inside the section."""
        starts = self.starts
        if frame < len(starts):
            return starts[frame]
        return self._walk_to(frame)

    def _walk_to(self, frame: int) -> int:
        starts = self.starts
        while len(starts) <= frame:
            _records, end = parse_frame(self, len(starts) - 1, starts[-1], with_records=False)
            starts.append(end)
        return starts[frame]


def parse_frame(walk: FrameWalk, frame: int, offset: int, *, with_records: bool) -> tuple[list[ImageRecord], int]:
    """The image records of ``frame``, which starts at ``offset`` of the episode's image section, and its end.

    The one parser of the variable-length records (num_cameras, then per camera a name and an
    image header with data_len, then the data), from the declared records; every field is
    bounds-checked before it is read and a failure names the frame, camera and field. With
    ``with_records=False`` only the lengths are read, to find where the next frame starts.
    """
    section, base, size = walk.section, walk.start, walk.size
    held = len(section)

    def need(at: int, length: int, what: str, *, read: bool = True) -> None:
        nonlocal section, held
        if at + length > held:
            if at + length > size:
                raise ERRORS.truncated_at(f"episode {walk.position} frame {frame} {what}", base + at, length,
                                          base + size)
            if read:  # image data is only bounded here, read when asked for: not a reason to fetch further
                section = walk.extend(at + length)
                held = len(section)

    need(offset, CAMERA_COUNT.size, "num_cameras")
    (count,) = _READ_U16(section, offset)
    offset += CAMERA_COUNT.size
    records = []
    for camera in range(count):
        need(offset, STRING_LENGTH.size, f"camera {camera} name length")
        (name_length,) = _READ_U16(section, offset)
        name_at = offset + STRING_LENGTH.size
        need(name_at, name_length, f"camera {camera} name")
        header_at = name_at + name_length
        need(header_at, IMAGE_HEADER.size, f"camera {camera} image header")
        data_at = header_at + IMAGE_HEADER.size
        if with_records:
            width, height, channels, kind, length = _READ_IMAGE_HEADER(section, header_at)
        else:
            (length,) = _READ_DATA_LEN(section, header_at + _DATA_LEN_AT)
        need(data_at, length, f"camera {camera} image data", read=False)
        if with_records:
            raw = bytes(section[name_at:header_at])
            name = walk.names.get(raw)
            if name is None:
                name = walk.names[raw] = decode_utf8(memoryview(raw), f"episode {walk.position} frame {frame} "
                                                     f"camera {camera} name", base + name_at)
            records.append(ImageRecord(name, width, height, channels, kind, base + data_at, length))
        offset = data_at + length
    return records, offset
