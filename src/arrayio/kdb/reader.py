"""Reading .kdb files: map, check the header and the index as a whole, then
serve metadata, zero-copy state/action views and lazily decoded images.

Opening costs O(1) in the data size plus one vectorised sum over the N index
entries; each entry is checked the first time its episode is touched, before
any of its bytes are used. Image records are variable-length, so the start of
each frame inside an episode's image section is found by walking the frame
records once, as far as the frame asked for, and cached.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from .._binary import Source
from . import _images
from ._layout import (
    CAMERA_COUNT,
    ERRORS,
    FORMAT_NAME,
    HEADER,
    HEADER_SIZE,
    IMAGE_HEADER,
    IMAGE_RAW,
    INDEX_ENTRY,
    MAGIC,
    STRING_LENGTH,
    VERSION_MAJOR,
    BadMagic,
    EpisodeIdNotFound,
    EpisodeMeta,
    EpisodeNotFound,
    ImageDecodeError,
    InvalidUtf8,
    decode_meta,
    decode_utf8,
    step_dtype,
    step_size,
)

BAD_IMAGE_POLICIES = ("raise", "skip")
_SECTIONS = (("meta", "meta_offset", "meta_length"),
             ("state/action", "actions_offset", "actions_length"),
             ("images", "images_offset", "images_length"))


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


@dataclass(frozen=True)
class Episode:
    """One episode: metadata, zero-copy per-frame arrays and (lazy) images."""

    meta: EpisodeMeta
    steps: np.ndarray
    images: EpisodeImages | None

    @property
    def states(self) -> np.ndarray:
        """(frames, state_dim) float32 view."""
        return self.steps["state"]

    @property
    def actions(self) -> np.ndarray:
        """(frames, action_dim) float32 view."""
        return self.steps["action"]

    @property
    def rewards(self) -> np.ndarray:
        """(frames,) float32 view."""
        return self.steps["reward"]

    @property
    def terminals(self) -> np.ndarray:
        """(frames,) uint8 view of the is_terminal bytes; any non-zero value means terminal."""
        return self.steps["is_terminal"]

    def __len__(self) -> int:
        return len(self.steps)


class Frame(NamedTuple):
    """One frame of one episode: its state/action values and the camera images asked for."""

    episode: int
    index: int
    state: np.ndarray
    action: np.ndarray
    reward: float
    terminal: bool
    images: dict[str, np.ndarray]


class EpisodeImages:
    """The camera images of one episode, read and decoded only when asked for."""

    def __init__(self, file: KdbFile, position: int, on_bad_image: str) -> None:
        self._file = file
        self.position = position
        self.on_bad_image = on_bad_image
        self.num_frames = file.entry(position).num_frames
        self._records: dict[int, list[ImageRecord]] = {}

    def __len__(self) -> int:
        return self.num_frames

    def records(self, frame: int) -> list[ImageRecord]:
        """The image records of ``frame`` in file order (parsed once per episode object)."""
        records = self._records.get(frame)
        if records is None:
            records = self._records[frame] = self._file.image_records(self.position, frame)
        return records

    @property
    def cameras(self) -> list[str]:
        """Every camera name in the episode, in order of first appearance (walks all frames once)."""
        names: dict[str, None] = {}
        for frame in range(self.num_frames):
            for record in self.records(frame):
                names.setdefault(record.camera, None)
        return list(names)

    def raw(self, frame: int, camera: str) -> memoryview:
        """The stored bytes of one camera image (zero-copy; JPEG/PNG bytes when compressed)."""
        for record in self.records(frame):
            if record.camera == camera:
                return self._file.source.view(record.offset, record.length, f"image {camera!r}")
        raise KeyError(f"kdb: episode {self.position} frame {frame} has no camera {camera!r}")

    def frame(self, frame: int, cameras: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Decoded (H, W, C) uint8 images of ``frame`` by camera (all cameras when ``cameras`` is None)."""
        return self._file.frame_images(self.position, frame, cameras, self.on_bad_image, self.records(frame))

    def stack(self, camera: str) -> tuple[np.ndarray, np.ndarray]:
        """All frames of ``camera`` as one (frames, H, W, C) array plus a (frames,) presence mask.

        Frames without the camera (or whose image was skipped as bad) stay zero
        and are False in the mask: the time axis never shifts.
        """
        images: list[np.ndarray | None] = [
            self.frame(frame, [camera]).get(camera) for frame in range(self.num_frames)
        ]
        shapes = {image.shape for image in images if image is not None}
        if len(shapes) > 1:
            raise ValueError(f"kdb: camera {camera!r} of episode {self.position} changes shape: {sorted(shapes)}")
        shape = shapes.pop() if shapes else (0, 0, 0)
        stacked = np.zeros((self.num_frames, *shape), dtype=np.uint8)
        present = np.zeros(self.num_frames, dtype=bool)
        for frame, image in enumerate(images):
            if image is not None:
                stacked[frame] = image
                present[frame] = True
        return stacked, present

    def __getitem__(self, camera: str) -> np.ndarray:
        """All frames of ``camera`` stacked; raises when a frame lacks the camera."""
        stacked, present = self.stack(camera)
        if not present.all():
            missing = int(np.flatnonzero(~present)[0])
            raise KeyError(f"kdb: episode {self.position} frame {missing} has no image of camera {camera!r}")
        return stacked


class KdbFile:
    """An open .kdb file: header, index (a structured view), episodes on demand."""

    def __init__(self, source: Source, *, on_bad_image: str = "raise") -> None:
        if on_bad_image not in BAD_IMAGE_POLICIES:
            raise ValueError(f"kdb: on_bad_image must be one of {BAD_IMAGE_POLICIES}, got {on_bad_image!r}")
        self.source = source
        self.on_bad_image = on_bad_image
        self.header = self._read_header()
        self.index = self._read_index()
        self._entries: dict[int, Any] = {}
        self._walks: dict[int, _FrameWalk] = {}
        self._steps: dict[int, np.ndarray] = {}
        self._positions_by_id: dict[int, int] | None = None
        self._first_frames: np.ndarray | None = None

    # -- opening -------------------------------------------------------------------------------

    def _read_header(self) -> Any:
        if self.source.size < HEADER_SIZE:
            raise ERRORS.truncated_at("header", 0, HEADER_SIZE, self.source.size)
        header = HEADER.read(self.source, 0)
        if header.magic != MAGIC:
            raise BadMagic(format=FORMAT_NAME, field="header.magic", offset=0, expected=MAGIC, found=header.magic)
        if header.version_major > VERSION_MAJOR:
            raise ERRORS.version("header.version_major", HEADER.offsets["version_major"],
                                 supported=f"major {VERSION_MAJOR} (any minor)", found=header.version_major,
                                 newer=True)
        return header

    def _read_index(self) -> np.ndarray:
        header = self.header
        offset, length = header.index_offset, header.index_length
        if length % INDEX_ENTRY.size:
            raise ERRORS.invalid("header.index_length", HEADER.offsets["index_length"],
                                 f"a multiple of {INDEX_ENTRY.size}", length)
        if offset < HEADER_SIZE:
            raise ERRORS.invalid("header.index_offset", HEADER.offsets["index_offset"],
                                 f"an offset past the {HEADER_SIZE}-byte header", offset)
        count = length // INDEX_ENTRY.size
        if header.num_episodes != count:
            raise ERRORS.invalid("header.num_episodes", HEADER.offsets["num_episodes"],
                                 f"{count} (index_length {length} / {INDEX_ENTRY.size})", header.num_episodes)
        self.source.check(offset, length, f"episode index ({count} entries of {INDEX_ENTRY.size} bytes)")
        index = INDEX_ENTRY.read_array(self.source, offset, count, what="episode index")
        frames = int(index["num_frames"].sum(dtype=np.uint64))
        if header.num_frames != frames:
            raise ERRORS.invalid("header.num_frames", HEADER.offsets["num_frames"],
                                 f"{frames} (the sum of the index's num_frames)", header.num_frames)
        return index

    def _check_entry(self, position: int) -> Any:
        """Decode index entry ``position`` and check it: the state/action length matches its counts
        and every section lies between the header and the index (the spec's file order)."""
        base = self.header.index_offset
        entry = INDEX_ENTRY.unpack(self.source.view(INDEX_ENTRY.offset_of("episode_id", base, position),
                                                    INDEX_ENTRY.size, f"episode {position} index entry"))
        stride = step_size(entry.state_dim, entry.action_dim)
        if entry.actions_length != entry.num_frames * stride:
            raise ERRORS.invalid(f"episode {position} index.actions_length",
                                 INDEX_ENTRY.offset_of("actions_length", base, position),
                                 f"num_frames * (4*state_dim + 4*action_dim + 5) = {entry.num_frames * stride}",
                                 entry.actions_length)
        for section, offset_field, length_field in _SECTIONS:
            start, length = getattr(entry, offset_field), getattr(entry, length_field)
            if start < HEADER_SIZE or start + length > base:
                raise ERRORS.invalid(f"episode {position} index.{offset_field}",
                                     INDEX_ENTRY.offset_of(offset_field, base, position),
                                     f"a {section} section ({length_field} {length}) inside [{HEADER_SIZE}, {base}), "
                                     "between the header and the index", start)
        return entry

    # -- whole file ------------------------------------------------------------------------------

    def __enter__(self) -> KdbFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the map (arrays already handed out keep their pages alive)."""
        self.index = self.index[:0].copy()
        self._entries.clear()
        self._walks.clear()
        self._steps.clear()
        self.source.close()

    def __len__(self) -> int:
        return len(self.index)

    def __iter__(self) -> Iterator[Episode]:
        for position in range(len(self)):
            yield self.read_episode(position)

    def __getitem__(self, position: int) -> Episode:
        return self.read_episode(position)

    def __repr__(self) -> str:
        return f"<kdb file {self.source.name}: {len(self)} episodes, {self.num_frames} frames, version {self.version}>"

    @property
    def version(self) -> str:
        """"major.minor" from the header."""
        return f"{self.header.version_major}.{self.header.version_minor}"

    @property
    def num_frames(self) -> int:
        """Frames over all episodes."""
        return int(self.header.num_frames)

    @property
    def first_frames(self) -> np.ndarray:
        """(episodes + 1,) int64: global number of each episode's first frame, then the total."""
        if self._first_frames is None:
            counts = self.index["num_frames"].astype(np.int64)
            self._first_frames = np.concatenate([[0], np.cumsum(counts)])
        return self._first_frames

    def locate(self, global_frame: int) -> tuple[int, int]:
        """(episode position, frame in episode) of a frame numbered across the whole file."""
        if not 0 <= global_frame < self.num_frames:
            raise EpisodeNotFound(f"kdb: frame {global_frame} is outside 0..{self.num_frames - 1}")
        position = int(np.searchsorted(self.first_frames, global_frame, side="right")) - 1
        return position, int(global_frame - self.first_frames[position])

    # -- one episode -----------------------------------------------------------------------------

    def entry(self, position: int) -> Any:
        """The checked index entry (a namedtuple) of the episode at ``position`` (negative counts from the end)."""
        entry = self._entries.get(position)
        if entry is None:
            if not isinstance(position, (int, np.integer)) or isinstance(position, bool):
                raise TypeError(f"kdb: episode position must be an int, got {type(position).__name__}")
            if not -len(self) <= position < len(self):
                raise EpisodeNotFound(f"kdb: episode {position} is outside 0..{len(self) - 1}")
            normal = int(position) % len(self)
            entry = self._entries.get(normal)
            if entry is None:
                entry = self._entries[normal] = self._check_entry(normal)
        return entry

    def read_meta(self, position: int) -> EpisodeMeta:
        """Metadata of the episode at ``position`` (reads only its metadata blob)."""
        entry = self.entry(position)
        position %= len(self)
        offset, length = entry.meta_offset, entry.meta_length
        blob = self.source.view(offset, length, f"episode {position} metadata")
        embodiment, task, fps, success, total_reward = decode_meta(blob, offset, f"episode {position}")
        return EpisodeMeta(episode_id=entry.episode_id, num_frames=entry.num_frames,
                           state_dim=entry.state_dim, action_dim=entry.action_dim,
                           embodiment=embodiment, task=task, fps=fps, success=success, total_reward=total_reward)

    def steps(self, position: int) -> np.ndarray:
        """Zero-copy structured view (frames,) of state, action, reward, is_terminal."""
        steps = self._steps.get(position)
        if steps is None:
            entry = self.entry(position)
            position = int(position) % len(self)
            steps = self._steps[position] = self.source.array(
                entry.actions_offset, entry.num_frames, step_dtype(entry.state_dim, entry.action_dim),
                f"episode {position} state/action section")
        return steps

    def read_episode(self, position: int, *, on_bad_image: str | None = None) -> Episode:
        """Metadata, state/action views and lazy images of the episode at ``position``."""
        meta = self.read_meta(position)
        position = int(position) % len(self)
        policy = on_bad_image or self.on_bad_image
        if policy not in BAD_IMAGE_POLICIES:
            raise ValueError(f"kdb: on_bad_image must be one of {BAD_IMAGE_POLICIES}, got {policy!r}")
        return Episode(meta, self.steps(position), EpisodeImages(self, position, policy))

    def read_episode_actions_only(self, position: int) -> Episode:
        """Metadata and state/action views; the image section is never touched."""
        meta = self.read_meta(position)
        return Episode(meta, self.steps(position), None)

    def position_of(self, episode_id: int) -> int:
        """The position of the first episode carrying ``episode_id`` (a dict built on first use)."""
        if self._positions_by_id is None:
            ids = self.index["episode_id"].tolist()
            self._positions_by_id = {eid: position for position, eid in reversed(list(enumerate(ids)))}
        try:
            return self._positions_by_id[int(episode_id)]
        except KeyError:
            raise EpisodeIdNotFound(f"kdb: no episode has id {episode_id}") from None

    def episode_by_id(self, episode_id: int, *, on_bad_image: str | None = None) -> Episode:
        """The episode carrying ``episode_id``."""
        return self.read_episode(self.position_of(episode_id), on_bad_image=on_bad_image)

    # -- frames and images -------------------------------------------------------------------------

    def read_frame(self, position: int, frame: int, *, cameras: Sequence[str] | None = None,
                   images: bool = True, on_bad_image: str | None = None) -> Frame:
        """One frame: state/action values and decoded camera images (``images=False`` skips them)."""
        steps = self.steps(position)
        position = int(position) % len(self)
        if not 0 <= frame < len(steps):
            raise EpisodeNotFound(f"kdb: frame {frame} is outside 0..{len(steps) - 1} of episode {position}")
        step = steps[frame]
        decoded = self.frame_images(position, frame, cameras, on_bad_image or self.on_bad_image) if images else {}
        return Frame(position, frame, step["state"], step["action"], float(step["reward"]),
                     bool(step["is_terminal"]), decoded)

    def frame_images(self, position: int, frame: int, cameras: Sequence[str] | None, on_bad_image: str,
                     records: list[ImageRecord] | None = None) -> dict[str, np.ndarray]:
        """Decoded (H, W, C) uint8 images of one frame by camera; bad ones raise or are skipped with a warning."""
        decoded = {}
        for record in records if records is not None else self.image_records(position, frame):
            if (cameras is not None and record.camera not in cameras) or record.camera in decoded:
                continue
            try:
                decoded[record.camera] = self.decode_image(record)
            except ImageDecodeError as error:
                if on_bad_image == "raise":
                    raise ImageDecodeError(format=FORMAT_NAME, offset=error.offset, expected=error.expected,
                                           found=error.found, field=f"episode {position} frame {frame} camera "
                                                                   f"{record.camera!r} {error.field}") from None
                warnings.warn(f"kdb: skipped the image of episode {position} frame {frame} camera "
                              f"{record.camera!r}: {error}", RuntimeWarning, stacklevel=3)
        return decoded

    def decode_image(self, record: ImageRecord) -> np.ndarray:
        """Pixels of one image record: a zero-copy (H, W, C) view when raw, decoded when compressed."""
        data = self.source.view(record.offset, record.length, f"image {record.camera!r}")
        if not record.compressed:
            expected = record.width * record.height * record.channels
            if expected != record.length:
                raise ImageDecodeError(format=FORMAT_NAME, field="image data_len", offset=record.offset,
                                       expected=f"width*height*channels = {expected} raw bytes",
                                       found=record.length)
            pixels = np.frombuffer(data, dtype=np.uint8)
            try:
                return pixels.reshape(record.height, record.width, record.channels)
            except ValueError:  # with 0 channels any width x height is 0 bytes; numpy cannot shape 2**32 x 2**32
                raise ImageDecodeError(format=FORMAT_NAME, field="image width/height", offset=record.offset,
                                       expected="dimensions a numpy array can have",
                                       found=f"{record.width}x{record.height}x{record.channels}") from None
        try:
            return _images.decode(data, record.width, record.height, record.channels)
        except ValueError as error:
            raise ImageDecodeError(format=FORMAT_NAME, field="image data", offset=record.offset,
                                   expected="a decodable JPEG or PNG", found=str(error)) from None

    def image_records(self, position: int, frame: int) -> list[ImageRecord]:
        """Parse the image records of one frame (finding the frame's start on first use)."""
        walk = self._walk(position)
        if not 0 <= frame < walk.num_frames:
            raise EpisodeNotFound(f"kdb: frame {frame} is outside 0..{walk.num_frames - 1} "
                                  f"of episode {walk.position}")
        section, names = walk.section, walk.names
        offset = walk.frame_start(frame)
        records = []
        try:
            (count,) = _READ_U16(section, offset)
            offset += CAMERA_COUNT.size
            for _ in range(count):
                (name_length,) = _READ_U16(section, offset)
                name_at = offset + STRING_LENGTH.size
                offset = name_at + name_length
                width, height, channels, kind, length = _READ_IMAGE_HEADER(section, offset)
                offset += IMAGE_HEADER.size
                if offset + length > len(section):
                    raise struct.error("image data past the section")
                raw = bytes(section[name_at:name_at + name_length])
                name = names.get(raw)
                if name is None:
                    name = names[raw] = decode_utf8(memoryview(raw), "camera name", walk.start + name_at)
                records.append(ImageRecord(name, width, height, channels, kind, walk.start + offset, length))
                offset += length
        except (struct.error, InvalidUtf8):
            self._explain_frame(walk, frame)
        return records

    def _explain_frame(self, walk: _FrameWalk, frame: int) -> None:
        """Re-parse a frame that failed the fast parse, field by field, and raise the precise error."""
        section, start = walk.section, walk.start
        offset = walk.frame_start(frame)
        where = f"episode {walk.position} frame {frame}"
        count = self._unpack(CAMERA_COUNT, section, offset, start, f"{where} num_cameras").num_cameras
        offset += CAMERA_COUNT.size
        for camera in range(count):
            what = f"{where} camera {camera}"
            name_length = self._unpack(STRING_LENGTH, section, offset, start, f"{what} name length").length
            offset += STRING_LENGTH.size
            self._bounds(section, offset, name_length, start, f"{what} name")
            name = decode_utf8(section[offset:offset + name_length], f"{what} name", start + offset)
            offset += name_length
            head = self._unpack(IMAGE_HEADER, section, offset, start, f"{what} ({name!r}) image header")
            offset += IMAGE_HEADER.size
            self._bounds(section, offset, head.data_len, start, f"{what} ({name!r}) image data")
            offset += head.data_len
        raise ERRORS.invalid(f"{where} image records", start + walk.frame_start(frame), "a parsable frame")

    def frame_offset(self, position: int, frame: int) -> int:
        """Absolute offset of a frame's image records; ``frame == num_frames`` gives where the last one ends."""
        walk = self._walk(position)
        if not 0 <= frame <= walk.num_frames:
            raise EpisodeNotFound(f"kdb: frame {frame} is outside 0..{walk.num_frames} of episode {walk.position}")
        return walk.start + walk.frame_start(frame)

    def _walk(self, position: int) -> _FrameWalk:
        """The (cached) frame finder of one episode's image section."""
        walk = self._walks.get(position)
        if walk is None:
            entry = self.entry(position)
            position = int(position) % len(self)
            section = self.source.view(entry.images_offset, entry.images_length, f"episode {position} image section")
            walk = self._walks[position] = _FrameWalk(position, entry.images_offset, section, entry.num_frames)
        return walk

    @staticmethod
    def _bounds(section: memoryview, offset: int, length: int, base: int, what: str) -> None:
        if offset + length > len(section):
            raise ERRORS.truncated_at(what, base + offset, length, base + len(section))

    @classmethod
    def _unpack(cls, record: Any, section: memoryview, offset: int, base: int, what: str) -> Any:
        cls._bounds(section, offset, record.size, base, what)
        return record.unpack(section, offset)


class _FrameWalk:
    """Finds where each frame's image records start inside one episode's image section.

    Records are variable-length, so a frame is found by walking the records
    before it (reading only the name lengths and data lengths, bounds-checked)
    as far as the frame asked for; the starts found are cached, so each
    record is walked at most once per open file.
    """

    def __init__(self, position: int, start: int, section: memoryview, num_frames: int) -> None:
        self.position = position
        self.start = start
        self.section = section
        self.num_frames = num_frames
        self.starts = [0]
        self.names: dict[bytes, str] = {}

    def frame_start(self, frame: int) -> int:
        """Offset of ``frame`` (``num_frames``: the end of the last frame) inside the section."""
        starts = self.starts
        if frame < len(starts):
            return starts[frame]
        return self._walk_to(frame)

    def _walk_to(self, frame: int) -> int:
        starts, section = self.starts, self.section
        size = len(section)
        offset = starts[-1]
        known = len(starts)
        try:
            while known <= frame:
                (count,) = _READ_U16(section, offset)
                offset += 2
                for _ in range(count):
                    (name_length,) = _READ_U16(section, offset)
                    offset += 2 + name_length
                    (data_length,) = _READ_DATA_LEN(section, offset + _DATA_LEN_AT)
                    offset += IMAGE_HEADER.size + data_length
                if offset > size:
                    raise struct.error("frame runs past its section")
                starts.append(offset)
                known += 1
        except struct.error:
            walked = known - 1
            raise ERRORS.truncated_at(f"episode {self.position} frame {walked} image records",
                                      self.start + starts[walked], max(offset, starts[walked] + 2) - starts[walked],
                                      self.start + size) from None
        return starts[frame]


def open_file(target: Any, *, on_bad_image: str = "raise") -> KdbFile:
    """Open a .kdb path (memory-mapped), bytes or seekable binary file."""
    source = Source.open(target, ERRORS)
    try:
        return KdbFile(source, on_bad_image=on_bad_image)
    except BaseException:
        source.close()
        raise
