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

import bisect
import contextlib
import glob
import math
import os
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from .._edge import options_for
from .._remote import RemoteFile
from .._remote._settings import CLIENT_VARIABLE, checked_options
from .._remote._shared import make_shared_folder, remove_shared_folder
from .._sources import expand_url_pattern, is_remote, is_url_pattern
from ..errors import naming_file
from ..kdb import IMAGE_TABLE_DTYPE, NO_IMAGE, KdbFile
from ._arguments import item_index, item_indices

_GLOB_CHARACTERS = frozenset("*?[")
# Parsed image records kept per process, in rows (48 bytes per camera each), and copied state/action
# rows: past the budget the rows are dropped and parsed again when next needed.
IMAGE_TABLE_BUDGET = 1 << 22
STEP_ROWS_BUDGET = 1 << 22
FETCH_THREADS = 8  # concurrent range requests of one process's prefetch
READ_AHEAD_THREADS = 4  # the remote sets of a mixture read ahead side by side (each set one read-ahead at a time)


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


def open_shard(source: Any, storage_options: dict | None = None, *, on_bad_image: str = "raise") -> KdbFile:
    """Open one shard of a list: ``storage_options`` go to remote shards only (a list may mix paths and URLs)."""
    # The package's open, not the reader's: it is the one that learns new kinds of source (URLs).
    from ..kdb import open as open_kdb

    options = options_for(source, storage_options)
    # A path or URL names itself (the reader names its file); a file object among many shards needs a name too.
    name = os.fsdecode(source) if isinstance(source, (str, bytes, os.PathLike)) else \
        getattr(source, "url", None) or getattr(source, "name", None) or type(source).__name__
    with naming_file(name if isinstance(name, str) else type(source).__name__):
        return open_kdb(source, on_bad_image=on_bad_image, storage_options=options)


class ShardSet:
    """Episodes and frames of several .kdb files numbered as one, opened per process on first use.

    ``episode_shard[g]``/``episode_position[g]`` locate global episode ``g``;
    ``first_frames`` (episodes + 1,) numbers frames across every shard.
    """

    def __init__(self, source: Any, *, on_bad_image: str = "raise", need_fps: bool = False,
                 storage_options: dict | None = None) -> None:
        checked_options(storage_options)
        self.sources = resolve_sources(source, storage_options)
        self.remote = any(is_remote(shard) for shard in self.sources)  # read in ranges, worth prefetching
        self.storage_options = storage_options
        self.on_bad_image = on_bad_image
        shards, positions, frames, fps = [], [], [], []
        self.cameras: list[str] = []
        self.dims: dict[str, int] = {}  # state and action sizes of the first episode
        self._files: dict[int, KdbFile] = {}
        self._pid = os.getpid()
        self._builder = self._pid
        # Where the set is built, remote shards are read with fsspec unless a client is named: obstore's runtime
        # does not survive a fork, so a process that started it hands its DataLoader workers fsspec, which
        # costs them 3-4x the CPU per byte (measured with moto); workers forked from here use obstore.
        named = "client" in (storage_options or {}) or os.environ.get(CLIENT_VARIABLE)
        building = {"client": "fsspec", **(storage_options or {})} if self.remote and not named else None
        # Other processes (DataLoader workers) share the sections they fetch through a folder: with random
        # frames each worker's first batches ask for nearly every episode, fetched once for all of them.
        # What is read here (each shard's start and index) goes there too, and the workers open each shard
        # with its size and ETag from here: they open it without a request.
        self._shared: tuple[str, int] | None = None
        if self.remote and "shared_cache" not in (storage_options or {}):
            self._shared = make_shared_folder()
            weakref.finalize(self, remove_shared_folder, self._shared[0], self._builder)
            building = {**(building or storage_options or {}), "shared_cache": self._shared[0],
                        "shared_cache_bytes": self._shared[1]}
        # Each shard opened, read and closed again (thousands of shards must not hold many maps); remote ones
        # several at once: each costs round trips (its start, its index, with fps its metadata blobs), 16
        # shards 20 ms away took 0.95 s one after another (3.3 s with fps).
        def survey(shard: int) -> tuple[Any, np.ndarray, np.ndarray | None, dict[str, int], list[str]]:
            with self._open(shard, building) as kdb:
                counts = kdb.index["num_frames"].astype(np.int64)
                rates = np.array([meta.fps for meta in kdb.read_metas()], np.float64) if need_fps else None
                dims = {"state": int(kdb.index["state_dim"][0]), "action": int(kdb.index["action_dim"][0])} \
                    if len(kdb) else {}
                return kdb.remote_version, counts, rates, dims, _first_cameras(kdb) if shard == 0 else []

        shard_numbers = range(len(self.sources))
        surveys = list(_fetch_pool().map(survey, shard_numbers) if self.remote and len(self.sources) > 1
                       else map(survey, shard_numbers))
        self._versions: list[tuple[int, str | None, str] | None] = [found[0] for found in surveys]
        for shard, (_, counts, rates, dims, cameras) in enumerate(surveys):
            shards.append(np.full(len(counts), shard, np.int32))
            positions.append(np.arange(len(counts), dtype=np.int64))
            frames.append(counts)
            if rates is not None:
                fps.append(rates)
            self.dims = self.dims or dims
            self.cameras = self.cameras or cameras
        for shard in shard_numbers[1:]:  # the first shard's episodes were all empty: the next ones'
            if self.cameras:
                break
            with self._open(shard, building) as kdb:
                self.cameras = _first_cameras(kdb)
        self.episode_shard = np.concatenate(shards)
        self.episode_position = np.concatenate(positions)
        self.episode_frames = np.concatenate(frames)
        self.episode_fps = np.concatenate(fps) if need_fps else None
        self.first_frames = np.concatenate([[0], np.cumsum(self.episode_frames)]).astype(np.int64)
        self._first_frame_list = self.first_frames.tolist()  # one item's lookups in Python ints: no array calls
        self._ahead: tuple[int, Future] | None = None  # (process, its running read-ahead)
        self._forget_rows()

    @property
    def shared_cache(self) -> str | None:
        """The folder through which other processes (DataLoader workers) share the sections they fetch from
        remote shards (None for local ones, or where ``storage_options`` name one: ``shared_cache``)."""
        return None if self._shared is None else self._shared[0]

    @property
    def num_episodes(self) -> int:
        """Episodes over every shard."""
        return len(self.episode_frames)

    @property
    def num_frames(self) -> int:
        """Frames over every shard."""
        return self._first_frame_list[-1]

    def file(self, shard: int) -> KdbFile:
        """This process's open handle of shard ``shard`` (opened on first use, again after a fork)."""
        if self._pid != os.getpid():
            self._files = {}
            self._forget_rows()
            self._pid = os.getpid()
        kdb = self._files.get(shard)
        if kdb is None:
            kdb = self._files[shard] = self._open(shard)
            if self.remote:  # the whole index, in one range as the set was built: in its folder, not fetched
                len(kdb.index)  # block by block (a request per 8 entries, in turn) as the episodes are read
        return kdb

    def _open(self, shard: int, storage_options: dict | None = None) -> KdbFile:
        if storage_options is not None or self._shared is None or os.getpid() == self._builder or \
                not os.path.isdir(self._shared[0]):  # gone with the set that made it (a copy outlived it)
            options = self.storage_options if storage_options is None else storage_options
            return open_shard(self.sources[shard], options, on_bad_image=self.on_bad_image)
        options = {**(self.storage_options or {}), "shared_cache": self._shared[0],
                   "shared_cache_bytes": self._shared[1]}
        version, source = self._versions[shard], self.sources[shard]
        if version is None or not isinstance(source, str):  # a local path among remote shards, an open file
            return open_shard(source, options, on_bad_image=self.on_bad_image)
        size, etag, client = version
        return open_shard(RemoteFile(source, options, size=size, etag=etag, etag_client=client),
                          on_bad_image=self.on_bad_image)

    def _forget_rows(self) -> None:
        self._images = _EpisodeRows(self.num_episodes, IMAGE_TABLE_BUDGET)
        self._steps = _EpisodeRows(self.num_episodes, STEP_ROWS_BUDGET)

    def prefetch(self, episodes: np.ndarray, *, images: bool) -> None:
        """Fetch the sections of those global ``episodes`` (distinct) whose rows this process lacks from
        remote shards: one request per run of neighbouring episodes of a shard (parts of at most the
        transport's part size), the shards up to FETCH_THREADS at once. An object store answers each
        request after a round trip, so a batch touching 20 new episodes waits for about one, not 20;
        joining neighbours cut moto's work (it copies the whole object per range request) and the cold
        epoch from 2.3 to 1.0 s here (nothing to do for mapped files)."""
        prefetch_together([(self, episodes)], images=images)

    def read_ahead(self, items: Sequence[int], *, images: bool, beside: Sequence[int]) -> None:
        """Start fetching, in the background, what :meth:`prefetch` would fetch for the episodes of global
        frames ``items`` (the batch this process reads next), but those of frames ``beside`` (the batch it
        reads now, fetched by its own reads): the next batch's requests wait on the network while this
        one is decoded. :meth:`wait_read_ahead` waits for it; a failure is left to the reads that need
        those bytes, which say what went wrong."""
        if not self.remote or not len(items):
            return
        try:
            frames = self.check_frames(items)
        except (TypeError, ValueError, IndexError):  # the batch that holds them will say what is wrong, not this one
            return
        # (``beside`` is empty where a mixture's batch holds none of this set's frames)
        episodes = np.setdiff1d(self.locate(frames), self.locate(self.check_frames(beside))) if len(beside) \
            else np.unique(self.locate(frames))
        self.read_ahead_episodes(episodes, images=images)

    def read_ahead_episodes(self, episodes: np.ndarray, *, images: bool, meta: bool = False) -> None:
        """:meth:`read_ahead` of the global ``episodes`` (distinct) themselves (``meta``: their metadata too,
        for whole-episode reads)."""
        planned = self._sections_to_fetch(episodes, images)  # the files opened here, not in the thread
        if planned:
            self._ahead = (os.getpid(), _read_ahead_threads().submit(_fetch_sections, planned, images, meta))

    def wait_read_ahead(self) -> None:
        """Wait for this process's read-ahead, if one runs (its errors are the later reads' to meet)."""
        pid, pending = self._ahead or (None, None)
        self._ahead = None
        if pending is not None and pid == os.getpid():
            with contextlib.suppress(Exception):
                pending.result()

    def _sections_to_fetch(self, episodes: np.ndarray, images: bool) -> list[tuple[KdbFile, list[int]]]:
        """(open remote shard, positions of its episodes) for those of ``episodes`` without rows here."""
        if not self.remote or not len(episodes):
            return []
        missing = episodes[(self._steps.start[episodes] < 0) | (images & (self._images.start[episodes] < 0))]
        by_shard: dict[int, list[int]] = {}
        for shard, position in zip(self.episode_shard[missing].tolist(), self.episode_position[missing].tolist()):
            by_shard.setdefault(shard, []).append(position)
        return [(self.file(shard), positions) for shard, positions in by_shard.items()]  # opened in order

    def load_images(self, episodes: np.ndarray) -> _EpisodeRows:
        """The image records of every camera of the global ``episodes`` (distinct), each episode's records
        parsed once per process: ``rows.columns[camera][rows.start[e] + frame]`` (length -1: no image)."""
        rows = self._images
        for episode in rows.missing(episodes, self.episode_frames).tolist():
            shard, position = int(self.episode_shard[episode]), int(self.episode_position[episode])
            table = self.file(shard).image_table(position)
            rows.append(episode, int(self.episode_frames[episode]), table, IMAGE_TABLE_DTYPE, NO_IMAGE)
        return rows

    def load_steps(self, episodes: np.ndarray) -> _EpisodeRows:
        """The state/action rows of the global ``episodes`` (distinct), copied once per process into
        ``rows.columns["steps"][rows.start[e] + frame]``; ValueError when their layouts differ."""
        rows = self._steps
        for episode in rows.missing(episodes, self.episode_frames).tolist():
            shard, position = int(self.episode_shard[episode]), int(self.episode_position[episode])
            steps = self.file(shard).steps(position)
            column = rows.columns.get("steps")
            if column is not None and column.dtype != steps.dtype:
                if np.isin(episodes, np.flatnonzero(rows.start >= 0)).any():
                    raise ValueError(f"kdb: episodes of one batch store state/action as {column.dtype} and "
                                     f"{steps.dtype}; one batch needs one shape")
                rows.clear()
            rows.append(episode, len(steps), {"steps": steps}, steps.dtype, None)
        return rows

    def episode_rows(self, episode: int, *, images: bool) -> tuple[_EpisodeRows, _EpisodeRows | None]:
        """(step rows, image rows or None unless ``images``) holding global ``episode``, fetched and parsed
        where this process lacks them (see :meth:`load_steps`, :meth:`load_images`)."""
        if self._steps.start[episode] < 0 or images and self._images.start[episode] < 0:
            episodes = np.array([episode], np.int64)
            self.prefetch(episodes, images=images)
            self.load_steps(episodes)
            if images:
                self.load_images(episodes)
        return self._steps, self._images if images else None

    def episode_of(self, frame: int) -> int:
        """Global episode of global frame number ``frame`` (already checked to be in range)."""
        return bisect.bisect_right(self._first_frame_list, frame) - 1

    def first_frame(self, episode: int) -> int:
        """Global number of the first frame of global ``episode``."""
        return self._first_frame_list[episode]

    def frame_number(self, item: int) -> int:
        """``item`` as a global frame number, negatives counted from the end; IndexError outside."""
        asked = item_index(item)
        frame = asked + self.num_frames if asked < 0 else asked
        if not 0 <= frame < self.num_frames:
            raise IndexError(self._outside(asked))
        return frame

    def locate(self, frames: np.ndarray) -> np.ndarray:
        """Global episode of each global frame number (numbers already checked to be in range)."""
        return np.searchsorted(self.first_frames, frames, side="right") - 1

    def check_frames(self, items: Sequence[int]) -> np.ndarray:
        """``items`` as int64 global frame numbers, negatives counted from the end; IndexError outside."""
        total = self.num_frames
        if len(items) == 1:  # a plain __getitem__: Python's arithmetic costs a fifth of the array operations'
            return np.array([self.frame_number(items[0])], np.int64)
        asked = item_indices(items)
        if asked is None:
            raise IndexError(self._outside(max(np.asarray(items).reshape(-1).tolist(), key=abs)))
        frames = np.where(asked < 0, asked + total, asked)
        bad = (frames < 0) | (frames >= total)
        if bad.any():
            raise IndexError(self._outside(int(asked[np.flatnonzero(bad)[0]])))
        return frames

    def _outside(self, frame: int) -> str:
        return f"kdb: frame {frame} is outside 0..{self.num_frames - 1} of {len(self.sources)} shard(s)"

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_files"] = {}
        state["_ahead"] = None
        del state["_images"], state["_steps"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._pid = os.getpid()
        self._forget_rows()


class _EpisodeRows:
    """Per-episode rows appended into shared columns, so that one fancy index gathers a batch from many
    episodes (a loop over episodes costs more than the decode of small images). Past ``budget`` rows
    the columns are emptied whole and refilled from the episodes the next batch needs."""

    def __init__(self, episodes: int, budget: int) -> None:
        self.budget = budget
        self.start = np.full(episodes, -1, np.int64)
        self.columns: dict[str, np.ndarray] = {}
        self.used = 0

    def clear(self) -> None:
        """Forget every episode's rows."""
        self.start[:] = -1
        self.columns = {}
        self.used = 0

    def missing(self, episodes: np.ndarray, lengths: np.ndarray) -> np.ndarray:
        """Those of ``episodes`` without rows; when they do not fit in the budget, every row is dropped
        first (the episodes of one batch are always kept together, whatever their size)."""
        absent = episodes[self.start[episodes] < 0]
        if len(absent) and self.used + int(lengths[absent].sum()) > self.budget:
            self.clear()
            absent = episodes
        return absent

    def append(self, episode: int, count: int, values: dict[str, np.ndarray], dtype: np.dtype,
               fill: np.ndarray | None) -> None:
        """Store ``count`` rows of ``episode``; a column it lacks gets ``fill`` (columns stay aligned)."""
        end = self.used + count
        for name in values.keys() - self.columns.keys():
            self.columns[name] = np.empty(max(16, self.used), dtype)
            if fill is not None:
                self.columns[name][:self.used] = fill
        for name, column in self.columns.items():
            if len(column) < end:
                column = self.columns[name] = np.concatenate([column[:self.used],
                                                              np.empty(max(end, 2 * len(column)) - self.used,
                                                                       column.dtype)])
            given = values.get(name)
            column[self.used:end] = fill if given is None else given
        self.start[episode] = self.used
        self.used = end


def prefetch_together(wanted: Sequence[tuple[ShardSet, np.ndarray]], *, images: bool, meta: bool = False) -> None:
    """:meth:`ShardSet.prefetch` of (set, its distinct episodes) pairs, every set's requests side by side
    (``meta``: the episodes' metadata too)."""
    _fetch_sections([planned for shards, episodes in wanted for planned in shards._sections_to_fetch(episodes, images)],
                    images, meta)


def _fetch_sections(planned: list[tuple[KdbFile, list[int]]], images: bool, meta: bool = False) -> None:
    """Fetch the sections of the episodes at each file's positions, the files up to FETCH_THREADS at once."""
    if len(planned) == 1:
        planned[0][0].prefetch_episodes(planned[0][1], images=images, meta=meta)
    elif planned:
        list(_fetch_pool().map(lambda kdb, positions: kdb.prefetch_episodes(positions, images=images, meta=meta),
                               *zip(*planned)))


def _read_ahead_threads() -> ThreadPoolExecutor:
    """This process's threads for read-ahead (a pool does not survive a fork: one per process)."""
    pool = _READ_AHEAD.get(os.getpid())
    if pool is None:
        pool = _READ_AHEAD[os.getpid()] = ThreadPoolExecutor(READ_AHEAD_THREADS,
                                                             thread_name_prefix="arrayio-kdb-read-ahead")
    return pool


_READ_AHEAD: dict[int, ThreadPoolExecutor] = {}


def _fetch_pool() -> ThreadPoolExecutor:
    """This process's threads for remote prefetches (a pool does not survive a fork: one per process)."""
    pool = _FETCH_POOLS.get(os.getpid())
    if pool is None:
        pool = _FETCH_POOLS[os.getpid()] = ThreadPoolExecutor(FETCH_THREADS, thread_name_prefix="arrayio-kdb-fetch")
    return pool


_FETCH_POOLS: dict[int, ThreadPoolExecutor] = {}


def _first_cameras(kdb: KdbFile) -> list[str]:
    """The cameras of the first frame of the first non-empty episode (none for an empty file)."""
    for position in range(len(kdb)):
        if kdb.entry(position).num_frames:
            return [record.camera for record in kdb.image_records(position, 0)]
    return []


MAX_OFFSET_FRAMES = 2**31  # past any episode (offsets there are clamped to its edge), and within int64 sums


def frame_offsets(deltas: Sequence[float] | np.ndarray, fps: float, tolerance_s: float, key: str) -> np.ndarray:
    """Whole-frame offsets of ``deltas`` seconds at ``fps``; ValueError when one is off the frame grid."""
    values = np.asarray(deltas, dtype=np.float64).reshape(-1)
    if not len(values):
        raise ValueError(f"kdb: delta_timestamps[{key!r}] is empty")
    if not math.isfinite(fps) or fps <= 0:
        raise ValueError(f"kdb: delta_timestamps need each episode's fps, found fps {fps}")
    steps = np.rint(values * fps)
    if (np.abs(steps) > MAX_OFFSET_FRAMES).any():
        far = values[int(np.argmax(np.abs(steps)))]
        raise ValueError(f"kdb: delta_timestamps[{key!r}] = {far:g} s is more than {MAX_OFFSET_FRAMES} frames "
                         f"away at fps {fps:g}")
    off = np.abs(values - steps / fps)
    if (off > tolerance_s).any():
        bad = int(np.argmax(off))
        raise ValueError(f"kdb: delta_timestamps[{key!r}] = {values[bad]:g} s is not a multiple of 1/fps = "
                         f"{1 / fps:g} s (fps {fps:g}) within tolerance_s={tolerance_s:g} "
                         f"(nearest: {steps[bad] / fps:g} s)")
    return steps.astype(np.int64)
