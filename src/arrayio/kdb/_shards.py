"""Many .kdb shards read as one dataset: one global episode and frame numbering,
files opened lazily, once per process.

A source is a path, a URL (handed as it is to :func:`arrayio.kdb.open`), a
glob pattern (local, or a URL listed through fsspec: ``s3://bucket/shards/*.kdb``),
a folder (its ``*.kdb`` files) or a list of any of these. The
shard tables (frames and fps of every episode) are read once where the set is
built; pickling keeps only the sources and those tables, so DataLoader workers
and other processes map the files themselves on first use.
"""

from __future__ import annotations

import glob
import math
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._sources import expand_url_pattern, is_remote, is_url_pattern
from ._reader import KdbFile

_GLOB_CHARACTERS = frozenset("*?[")
# Parsed image tables kept per process, in images (about 40 bytes each): the oldest episodes go first.
IMAGE_TABLE_BUDGET = 1 << 22
IMAGE_TABLE_DTYPE = np.dtype([("offset", np.int64), ("length", np.int64), ("height", np.int64),
                              ("width", np.int64), ("channels", np.int64), ("format", np.int64)])


def resolve_sources(source: Any, storage_options: dict | None = None) -> list[Any]:
    """The shard list named by ``source``: paths and URLs in sorted glob order, other URLs unchanged.

    URL globs are listed through fsspec with ``storage_options``; HTTP(S) cannot be listed and raises
    UnsupportedError.
    """
    items = list(source) if isinstance(source, (list, tuple)) else [source]
    shards: list[Any] = []
    for item in items:
        if isinstance(item, (bytes, os.PathLike)):
            item = os.fsdecode(item)
        if not isinstance(item, str):
            shards.append(item)  # an already-open binary file or bytes-like source
        elif "://" in item:
            if not is_url_pattern(item):
                shards.append(item)
                continue
            matches = expand_url_pattern(item, storage_options)
            if not matches:
                raise FileNotFoundError(f"kdb: no file matches {item!r}")
            shards.extend(matches)
        elif _GLOB_CHARACTERS & set(item):
            matches = sorted(glob.glob(os.path.expanduser(item), recursive=True))
            if not matches:
                raise FileNotFoundError(f"kdb: no file matches {item!r}")
            shards.extend(matches)
        elif os.path.isdir(item):
            matches = sorted(glob.glob(os.path.join(item, "*.kdb")))
            if not matches:
                raise FileNotFoundError(f"kdb: folder {item!r} holds no .kdb files")
            shards.extend(matches)
        else:
            shards.append(item)
    if not shards:
        raise ValueError("kdb: no shards given (an empty list)")
    return shards


class ShardSet:
    """Episodes and frames of several .kdb files numbered as one, opened per process on first use.

    ``episode_shard[g]``/``episode_position[g]`` locate global episode ``g``;
    ``first_frames`` (episodes + 1,) numbers frames across every shard.
    """

    def __init__(self, source: Any, *, on_bad_image: str = "raise", need_fps: bool = False,
                 storage_options: dict | None = None) -> None:
        self.sources = resolve_sources(source, storage_options)
        self.storage_options = storage_options
        self.on_bad_image = on_bad_image
        shards, positions, frames, fps = [], [], [], []
        self.cameras: list[str] = []
        self._files: dict[int, KdbFile] = {}
        self._tables: dict[tuple[int, int], dict[str, np.ndarray]] = {}
        self._table_sizes: dict[tuple[int, int], int] = {}
        self._table_images = 0
        self._pid = os.getpid()
        for shard in range(len(self.sources)):
            with self._open(shard) as kdb:  # closed again: thousands of shards must not hold thousands of maps
                counts = kdb.index["num_frames"].astype(np.int64)
                shards.append(np.full(len(counts), shard, np.int32))
                positions.append(np.arange(len(counts), dtype=np.int64))
                frames.append(counts)
                if need_fps:
                    fps.append(np.array([kdb.read_meta(p).fps for p in range(len(kdb))], np.float64))
                if not self.cameras:
                    self.cameras = _first_cameras(kdb)
        self.episode_shard = np.concatenate(shards)
        self.episode_position = np.concatenate(positions)
        self.episode_frames = np.concatenate(frames)
        self.episode_fps = np.concatenate(fps) if need_fps else None
        self.first_frames = np.concatenate([[0], np.cumsum(self.episode_frames)]).astype(np.int64)

    @property
    def num_episodes(self) -> int:
        """Episodes over every shard."""
        return len(self.episode_frames)

    @property
    def num_frames(self) -> int:
        """Frames over every shard."""
        return int(self.first_frames[-1])

    def file(self, shard: int) -> KdbFile:
        """This process's open handle of shard ``shard`` (opened on first use, again after a fork)."""
        if self._pid != os.getpid():
            self._files, self._tables, self._table_sizes, self._table_images = {}, {}, {}, 0
            self._pid = os.getpid()
        kdb = self._files.get(shard)
        if kdb is None:
            kdb = self._files[shard] = self._open(shard)
        return kdb

    def _open(self, shard: int) -> KdbFile:
        # The package's open, not the reader's: it is the one that learns new kinds of source (URLs).
        from . import open as open_kdb

        source = self.sources[shard]
        # storage_options belong to the remote shards of a list that may also hold paths.
        options = self.storage_options if self.storage_options and is_remote(source) else None
        return open_kdb(source, on_bad_image=self.on_bad_image, storage_options=options)

    def image_table(self, shard: int, position: int) -> dict[str, np.ndarray]:
        """Camera -> (frames,) table of where each frame's image is and what its record says (length -1:
        no image); each episode's image records are parsed once per process."""
        key = (shard, position)
        table = self._tables.get(key)
        if table is None:
            kdb = self.file(shard)
            frames = kdb.entry(position).num_frames
            table = {}
            for frame in range(frames):
                for record in kdb.image_records(position, frame):
                    column = table.get(record.camera)
                    if column is None:
                        column = table[record.camera] = np.zeros(frames, IMAGE_TABLE_DTYPE)
                        column["length"] = -1
                    if column["length"][frame] < 0:  # a repeated camera name: the first record counts
                        column[frame] = (record.offset, record.length, record.height, record.width,
                                         record.channels, record.format)
            images = frames * max(1, len(table))
            while self._tables and self._table_images + images > IMAGE_TABLE_BUDGET:
                oldest = next(iter(self._tables))
                del self._tables[oldest]
                self._table_images -= self._table_sizes.pop(oldest)
            self._tables[key] = table
            self._table_sizes[key] = images
            self._table_images += images
        return table

    def locate(self, frames: np.ndarray) -> np.ndarray:
        """Global episode of each global frame number (numbers already checked to be in range)."""
        return np.searchsorted(self.first_frames, frames, side="right") - 1

    def check_frames(self, items: Sequence[int]) -> np.ndarray:
        """``items`` as int64 global frame numbers, negatives counted from the end; IndexError outside."""
        frames = np.asarray(items, dtype=np.int64).reshape(-1)
        total = self.num_frames
        frames = np.where(frames < 0, frames + total, frames)
        bad = (frames < 0) | (frames >= total)
        if bad.any():
            raise IndexError(f"kdb: frame {int(np.asarray(items).reshape(-1)[np.flatnonzero(bad)[0]])} is outside "
                             f"0..{total - 1} of {len(self.sources)} shard(s)")
        return frames

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state.update(_files={}, _tables={}, _table_sizes={}, _table_images=0)
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._pid = os.getpid()


def _first_cameras(kdb: KdbFile) -> list[str]:
    """The cameras of the first frame of the first non-empty episode (none for an empty file)."""
    for position in range(len(kdb)):
        if kdb.entry(position).num_frames:
            return [record.camera for record in kdb.image_records(position, 0)]
    return []


def frame_offsets(deltas: Sequence[float] | np.ndarray, fps: float, tolerance_s: float, key: str) -> np.ndarray:
    """Whole-frame offsets of ``deltas`` seconds at ``fps``; ValueError when one is off the frame grid."""
    values = np.asarray(deltas, dtype=np.float64).reshape(-1)
    if not len(values):
        raise ValueError(f"kdb: delta_timestamps[{key!r}] is empty")
    if not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"kdb: delta_timestamps need each episode's fps, found fps {fps}")
    steps = np.rint(values * fps)
    off = np.abs(values - steps / fps)
    if (off > tolerance_s).any():
        bad = int(np.argmax(off))
        raise ValueError(f"kdb: delta_timestamps[{key!r}] = {values[bad]:g} s is not a multiple of 1/fps = "
                         f"{1 / fps:g} s (fps {fps:g}) within tolerance_s={tolerance_s:g} "
                         f"(nearest: {steps[bad] / fps:g} s)")
    return steps.astype(np.int64)
