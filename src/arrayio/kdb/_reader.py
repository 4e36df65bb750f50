"""Reading .kdb files: map, check the header and the index, then serve
metadata, zero-copy state/action views and lazily decoded images.

Opening a mapped file or bytes costs O(1) in the data size plus one vectorised
sum over the N index entries. A source read in ranges (a URL, a file object)
reads only the header at open: the index is read a block of entries at a time
as episodes are touched, and whole (with the same whole-index check) only by
the calls that need every entry. Each entry is checked the first time its
episode is touched, before any of its bytes are used. Image records are
variable-length, so the start of each frame inside an episode's image section
is found by walking the frame records once, as far as the frame asked for, and
cached.
"""

from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, overload

import numpy as np

from .._binary import Source
from .._edge import open_source
from .._readers import ReaderBase, names_its_file
from ..errors import FormatError, Problem
from . import _images
from ._batch_reads import BatchReads, even_frame_end
from ._codec import EpisodeMeta, decode_meta, step_dtype, step_size
from ._errors import (
    ERRORS,
    BadMagic,
    EpisodeIdNotFound,
    EpisodeNotFound,
    FileClosedError,
    ImageDecodeError,
    ImageTooLarge,
    MissingImage,
)
from ._frames import FrameWalk, ImageRecord, parse_frame
from ._lines import EntryLines
from ._records import (
    FORMAT_NAME,
    HEADER,
    HEADER_SIZE,
    INDEX_ENTRY,
    MAGIC,
    VERSION_MAJOR,
    VERSION_MINOR,
)

BAD_IMAGE_POLICIES = ("raise", "skip")
_SECTIONS = (("meta", "meta_offset", "meta_length"),
             ("state/action", "actions_offset", "actions_length"),
             ("images", "images_offset", "images_length"))
# A source read in ranges fetches index entries in aligned blocks of this many (512 bytes) when it has not read
# the whole index: open already spent the 64 KiB read-ahead on the header, and an episode read stays within
# 1% of (episode + 64 KiB) only if the index bytes it adds stay under about 650; neighbours read in order
# then share one request per block.
INDEX_BLOCK_ENTRIES = 8


def _check_int(value: Any, what: str) -> None:
    """TypeError unless ``value`` is an integer (Python's or numpy's; a bool or a float is not)."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"kdb: {what} must be an int, got {type(value).__name__}")


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
    index: int  # type: ignore[assignment]  # the frame number; a public name that shadows tuple.index
    state: np.ndarray
    action: np.ndarray
    reward: float
    terminal: bool
    images: dict[str, np.ndarray]


@names_its_file(lambda images: images._file.source.name)
class EpisodeImages(Mapping[str, "CameraFrames"]):
    """The camera images of one episode: a mapping camera -> its frames, read and decoded only when asked for."""

    def __init__(self, file: KdbFile, position: int, on_bad_image: str) -> None:
        self._file = file
        self.position = position
        self.on_bad_image = on_bad_image
        self.num_frames = file.entry(position).num_frames
        self._records: dict[int, list[ImageRecord]] = {}
        self._cameras: list[str] | None = None

    def __len__(self) -> int:
        return len(self.cameras)

    def __iter__(self) -> Iterator[str]:
        return iter(self.cameras)

    def __getitem__(self, camera: str) -> CameraFrames:
        if camera not in self.cameras:
            raise KeyError(camera)
        return CameraFrames(self, camera)

    def __repr__(self) -> str:
        return f"<kdb EpisodeImages episode {self.position}: {self.num_frames} frames of {self.cameras}>"

    def records(self, frame: int) -> list[ImageRecord]:
        """The image records of ``frame`` in file order (parsed once per episode object)."""
        records = self._records.get(frame)
        if records is None:
            records = self._records[frame] = self._file.image_records(self.position, frame)
        return records

    @property
    def cameras(self) -> list[str]:
        """Every camera name in the episode, in order of first appearance (walks all frames once)."""
        if self._cameras is None:
            names: dict[str, None] = {}
            for frame in range(self.num_frames):
                for record in self.records(frame):
                    names.setdefault(record.camera, None)
            self._cameras = list(names)
        return self._cameras

    def record(self, frame: int, camera: str) -> ImageRecord:
        """The image record of ``camera`` in ``frame`` (the first, when a camera is named twice)."""
        for record in self.records(frame):
            if record.camera == camera:
                return record
        raise MissingImage.at(f"episode {self.position} frame {frame}", camera)

    def raw(self, frame: int, camera: str) -> memoryview:
        """The stored bytes of one camera image (zero-copy; JPEG/PNG bytes when compressed)."""
        record = self.record(frame, camera)
        return self._file.source.view(record.offset, record.length, f"image {camera!r}")

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


@names_its_file(lambda frames: frames.images._file.source.name)
class CameraFrames(Sequence[np.ndarray]):
    """The frames of one camera in one episode: ``[i]`` decodes frame i, ``np.asarray`` stacks them all."""

    dtype = np.dtype(np.uint8)

    def __init__(self, images: EpisodeImages, camera: str) -> None:
        self.images = images
        self.camera = camera

    def __len__(self) -> int:
        return self.images.num_frames

    @overload  # type: ignore[override]  # a slice gives one stacked array, not a Sequence
    def __getitem__(self, index: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, index: slice) -> np.ndarray: ...

    def __getitem__(self, index: int | slice) -> np.ndarray:
        if isinstance(index, slice):
            frames = [self[frame] for frame in range(*index.indices(len(self)))]
            return np.stack(frames) if frames else np.zeros((0, *self.shape[1:]), np.uint8)
        frame = range(len(self))[index]
        image = self.images.frame(frame, [self.camera]).get(self.camera)
        if image is None:
            raise MissingImage.at(f"episode {self.images.position} frame {frame}", self.camera)
        return image

    @property
    def shape(self) -> tuple[int, ...]:
        """(frames, height, width, channels), from the first frame's image record (nothing decoded)."""
        record = self.images.record(0, self.camera) if len(self) else None
        return (len(self), record.height, record.width, record.channels) if record else (0, 0, 0, 0)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """All frames stacked as (frames, H, W, C) uint8; raises when a frame lacks the camera."""
        stacked, present = self.images.stack(self.camera)
        if not present.all():
            missing = int(np.flatnonzero(~present)[0])
            raise MissingImage.at(f"episode {self.images.position} frame {missing}", self.camera)
        return stacked if dtype is None else stacked.astype(dtype)

    def __repr__(self) -> str:
        return f"<kdb CameraFrames {self.camera!r} of episode {self.images.position}: shape {self.shape}>"


@names_its_file(lambda kdb: kdb.source.name)
class KdbFile(ReaderBase, BatchReads, EntryLines):
    """An open .kdb file: header, index (a structured view), episodes on demand, batched image reads.

    After ``close()`` every access raises ``FileClosedError``.
    """

    format = FORMAT_NAME
    closed_error = FileClosedError

    def __init__(self, source: Source, *, on_bad_image: str = "raise") -> None:
        if on_bad_image not in BAD_IMAGE_POLICIES:
            raise ValueError(f"kdb: on_bad_image must be one of {BAD_IMAGE_POLICIES}, got {on_bad_image!r}")
        self.source = source
        self.on_bad_image = on_bad_image
        self.header = self._read_header()
        self._num_episodes = self._check_index_extent()
        self._index: np.ndarray | None = None
        if source.buffer is not None:  # a mapped file or bytes: the whole index is a view, checked now
            self._index = self._read_index()
        self._entries: dict[int, Any] = {}
        self._walks: dict[int, FrameWalk] = {}
        self._steps: dict[int, np.ndarray] = {}
        self._positions_by_id: dict[int, int] | None = None
        self._first_frames: np.ndarray | None = None
        self._camera_names: dict[bytes, str] = {}

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

    def _check_index_extent(self) -> int:
        """Check where the header puts the index (no byte of it is read) and return the episode count."""
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
        return count

    def _read_index(self) -> np.ndarray:
        """The whole index as a structured view, its frame counts checked against header.num_frames."""
        header = self.header
        index = INDEX_ENTRY.read_array(self.source, header.index_offset, self._num_episodes, what="episode index")
        frames = int(index["num_frames"].sum(dtype=np.uint64))
        if header.num_frames != frames:
            raise ERRORS.invalid("header.num_frames", HEADER.offsets["num_frames"],
                                 f"{frames} (the sum of the index's num_frames)", header.num_frames)
        return index

    def _check_entry(self, position: int) -> Any:
        """Decode index entry ``position`` and check it: the state/action length matches its counts
        and every section lies between the header and the index (the spec's file order)."""
        base = self.header.index_offset
        if self._index is not None:  # held whole (a map, or read for a whole-index call): no read
            entry = INDEX_ENTRY.unpack(self._index, position * INDEX_ENTRY.size)
        else:
            first = position - position % INDEX_BLOCK_ENTRIES
            count = min(INDEX_BLOCK_ENTRIES, self._num_episodes - first)
            self.source.prefetch([(INDEX_ENTRY.offset_of("episode_id", base, first), count * INDEX_ENTRY.size)])
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

    def _release(self) -> None:
        # Arrays already handed out keep their pages alive.
        self.source.close()

    @property
    def index(self) -> np.ndarray:
        """Every index entry as a structured view (unchecked entries); read on first use when not mapped."""
        if self._index is None:
            self._index = self._read_index()
        return self._index

    def __len__(self) -> int:
        return self._num_episodes

    def __iter__(self) -> Iterator[Episode]:
        self.index  # noqa: B018 - one request for every entry instead of one per block
        for position in range(len(self)):
            yield self.read_episode(position)

    def __getitem__(self, position: int) -> Episode:
        return self.read_episode(position)

    def __repr__(self) -> str:
        if self.closed:
            return "<kdb file, closed>"
        # The header's frame count: a repr fetches nothing (num_frames may read the whole index first).
        return (f"<kdb file {self.source.name}: {len(self)} episodes, {self.header.num_frames} frames, "
                f"version {self.version}>")

    # -- the Reader protocol -----------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Episodes, frames, dims, cameras, embodiments and tasks."""
        metas = self.read_metas()
        self.prefetch_first_frames()  # the cameras of each episode's first frame, below
        cameras: dict[str, None] = {}
        for position, meta in enumerate(metas):
            if meta.num_frames:
                for record in self.image_records(position, 0):
                    cameras.setdefault(record.camera, None)
        dims = sorted({(meta.state_dim, meta.action_dim) for meta in metas})
        successes = [meta.success for meta in metas if meta.success is not None]
        return {
            "format": self.format,
            "version": self.version,
            "file_size": self.source.size,
            "summary": f"{len(self)} episodes, {self.num_frames} frames, state/action dims "
                       f"{', '.join(f'{s}/{a}' for s, a in dims) or '-'}, cameras {', '.join(cameras) or 'none'}",
            "num_episodes": len(self),
            "num_frames": self.num_frames,
            "created_timestamp": int(self.header.created_timestamp),
            "state_dims": sorted({s for s, _ in dims}),
            "action_dims": sorted({a for _, a in dims}),
            "cameras": list(cameras),
            "embodiments": sorted({meta.embodiment for meta in metas}),
            "tasks": sorted({meta.task for meta in metas}),
            "fps": sorted({meta.fps for meta in metas if not math.isnan(meta.fps)}),
            "success_rate": (sum(successes) / len(successes)) if successes else None,
        }

    def validate(self, *, decode_images: bool = True) -> list[Problem]:
        """Every problem found (empty list: valid): reserved bytes, then each episode's sections and images."""
        try:
            self.index  # noqa: B018 - read in ranges, the whole-index check runs here (mapped files: at open)
        except FormatError as error:
            return [Problem.from_error(error)]
        problems = []
        reserved = HEADER.nonzero_reserved(self.source.view(0, HEADER.size, "header"))
        if reserved and self.header.version_minor <= VERSION_MINOR:
            problems.append(ERRORS.problem("header.reserved", HEADER.offsets["reserved"], "zeros"))
        for position in range(len(self)):
            problems.extend(self._episode_problems(position, decode_images))
        return problems + self._overlap_problems()

    def _overlap_problems(self) -> list[Problem]:
        """Sections that share bytes: a writer lays each section out once, so an overlap is a damaged index."""
        sections = []
        for position in range(len(self)):
            try:
                entry = self.entry(position)
            except FormatError:
                continue  # reported by _episode_problems
            for name, offset_field, length_field in _SECTIONS:
                if getattr(entry, length_field):
                    sections.append((getattr(entry, offset_field), getattr(entry, length_field), position, name,
                                     offset_field))
        sections.sort()
        problems = []
        base = self.header.index_offset
        for (start, length, position, name, _), (later, _, later_position, later_name, later_field) in \
                itertools.pairwise(sections):
            if later < start + length:
                problems.append(ERRORS.problem(
                    f"episode {later_position} index.{later_field}",
                    INDEX_ENTRY.offset_of(later_field, base, later_position),
                    f"a {later_name} section clear of episode {position}'s {name} section (which ends at byte "
                    f"{start + length})", later))
        return problems

    def _episode_problems(self, position: int, decode_images: bool) -> list[Problem]:
        problems = []
        base = self.header.index_offset
        try:
            meta = self.read_meta(position)
            if meta.num_frames == 0:
                problems.append(ERRORS.problem(f"episode {position} index.num_frames",
                                               INDEX_ENTRY.offset_of("num_frames", base, position),
                                               "at least 1 frame", 0))
            self.steps(position)
            for frame in range(meta.num_frames):
                for record in self.image_records(position, frame):
                    if decode_images or not record.compressed:
                        self.decode_image(record)
            first, end = self.frame_offset(position, 0), self.frame_offset(position, meta.num_frames)
            stored = int(self.index["images_length"][position])
            if end - first != stored:
                problems.append(ERRORS.problem(f"episode {position} index.images_length",
                                               INDEX_ENTRY.offset_of("images_length", base, position),
                                               f"{end - first} bytes of image records", stored))
        except ImageDecodeError as error:
            problems.append(Problem.from_error(error, f"episode {position}"))
        except FormatError as error:
            problems.append(Problem.from_error(error))
        return problems

    @property
    def version(self) -> str:
        """"major.minor" from the header."""
        return f"{self.header.version_major}.{self.header.version_minor}"

    @property
    def num_frames(self) -> int:
        """Frames over all episodes (the header's count, once the whole index has confirmed it)."""
        self.index  # noqa: B018 - read and checked on first use when not mapped
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
            _check_int(position, "episode position")
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

    def _prefetch(self, position: int, sections: Sequence[tuple[str, str, str]]) -> None:
        # Remote sources fetch the episode's adjacent sections in one request (a no-op for maps).
        entry = self.entry(position)
        self.source.prefetch([(getattr(entry, start), getattr(entry, length)) for _, start, length in sections])

    def read_episode(self, position: int, *, on_bad_image: str | None = None) -> Episode:
        """Metadata, state/action views and lazy images of the episode at ``position``."""
        self._prefetch(position, _SECTIONS)
        meta = self.read_meta(position)
        position = int(position) % len(self)
        policy = on_bad_image or self.on_bad_image
        if policy not in BAD_IMAGE_POLICIES:
            raise ValueError(f"kdb: on_bad_image must be one of {BAD_IMAGE_POLICIES}, got {policy!r}")
        return Episode(meta, self.steps(position), EpisodeImages(self, position, policy))

    def read_episode_actions_only(self, position: int) -> Episode:
        """Metadata and state/action views; the image section is never touched."""
        self._prefetch(position, _SECTIONS[:2])
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
        """One frame: state/action values and decoded camera images (``images=False`` skips them).

        Frames are not indexed (image records are variable-length, so frame t is found by walking the
        records before it): a remote source fetches the episode's state/action section and its image
        section up to where frame t ends if all frames are the same size, in one request; a walk that
        finds the frames of unequal size fetches the rest of the section with one more.
        """
        entry = self.entry(position)
        _check_int(frame, "frame")  # numpy's IndexError named neither
        position = int(position) % len(self)
        ranges = [] if position in self._steps else [(entry.actions_offset, entry.actions_length)]
        if images and position not in self._walks:
            ranges.append((entry.images_offset, even_frame_end(entry, frame)))
        self.source.prefetch(ranges)
        steps = self.steps(position)
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
                    if isinstance(error, ImageTooLarge):
                        raise  # it names the limit to raise; a re-wrap would lose that
                    raise ImageDecodeError(format=FORMAT_NAME, offset=error.offset, expected=error.expected,
                                           found=error.found, field=f"episode {position} frame {frame} camera "
                                                                   f"{record.camera!r} {error.field}") from None
                warnings.warn(f"kdb: skipped the image of episode {position} frame {frame} camera "
                              f"{record.camera!r}: {error}", RuntimeWarning, stacklevel=3)
        return decoded

    def decode_image(self, record: ImageRecord) -> np.ndarray:
        """Pixels of one image record: a zero-copy (H, W, C) view when raw, decoded when compressed."""
        data = self.source.view(record.offset, record.length, f"image {record.camera!r}")
        # Raw pixels must be exactly the stored bytes; JPEG/PNG within their expansion or the image_bytes limit.
        _images.check_decoded_size(record.width, record.height, record.channels, record.length, record.compressed,
                                   f"image {record.camera!r}", record.offset)
        if not record.compressed:
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
        walk = self._walk(position, frame)
        if not 0 <= frame < walk.num_frames:
            raise EpisodeNotFound(f"kdb: frame {frame} is outside 0..{walk.num_frames - 1} "
                                  f"of episode {walk.position}")
        records, end = parse_frame(walk, frame, walk.frame_start(frame), with_records=True)
        if len(walk.starts) == frame + 1:  # the next frame's start, found on the way: frames in order parse once
            walk.starts.append(end)
        return records

    def frame_offset(self, position: int, frame: int) -> int:
        """Absolute offset of a frame's image records; ``frame == num_frames`` gives where the last one ends."""
        walk = self._walk(position, frame)
        if not 0 <= frame <= walk.num_frames:
            raise EpisodeNotFound(f"kdb: frame {frame} is outside 0..{walk.num_frames} of episode {walk.position}")
        return walk.start + walk.frame_start(frame)

    def _walk(self, position: int, frame: int) -> FrameWalk:
        """The (cached) frame finder of one episode's image section, about to look for ``frame``.

        A mapped file hands it the whole section. A source read in ranges hands it the section up to
        where ``frame`` ends if the episode's frames are all the same size; the walk itself checks
        every record, fetching the rest of the section only when that guess falls short.
        """
        walk = self._walks.get(position)
        entry = self.entry(position)
        wanted = entry.images_length if self.source.buffer is not None else even_frame_end(entry, frame)
        if walk is None:
            position = int(position) % len(self)
            what = f"episode {position} image section"
            offset = entry.images_offset

            def section_head(length: int) -> memoryview:
                return self.source.view(offset, length, what)

            walk = self._walks[position] = FrameWalk(position, offset, entry.images_length, entry.num_frames,
                                                      section_head, wanted)
        walk.wanted = max(walk.wanted, wanted)
        return walk


def open_file(target: Any, *, on_bad_image: str = "raise", storage_options: dict | None = None) -> KdbFile:
    """Open a .kdb path (memory-mapped), bytes, seekable binary file, URL or fsspec file."""
    source = open_source(target, ERRORS, storage_options)
    try:
        return KdbFile(source, on_bad_image=on_bad_image)
    except BaseException:
        source.close()
        raise
