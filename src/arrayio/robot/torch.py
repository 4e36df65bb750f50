"""PyTorch datasets over .kdb files (with torch_batch, torch_mixture and torch_loader, the modules of
arrayio that import torch).

``FrameDataset`` is a map-style dataset over every frame of one file or of many
shards (a path, URL, glob, folder or list) numbered as one. Windows follow
LeRobot's ``delta_timestamps`` ({key: [seconds]}, each episode's fps, clamped
at the episode edges and marked by ``<key>_is_pad``); ``history`` past states
and ``horizon`` future actions are shorthands for the common case.
``EpisodeDataset`` (torch_episode.py) yields whole episodes; ``MixtureDataset`` (torch_mixture.py) draws frames from
several datasets in proportion to weights, deterministically for a seed; ``GpuLoader``
(torch_loader.py) yields batches decoded on a GPU, choosing CPU or GPU decode with ``decode="auto"``.

Datasets fetch whole batches (``__getitems__``): indices are grouped by
episode, each frame's image records are parsed once and images are decoded
straight into one batch array. With ``decode="none"`` (or ``"cuda"``) a batch
carries each camera's stored JPEG/PNG bytes packed into one uint8 tensor plus
offsets; :func:`decode_batch` decodes them on the CPU or, in one nvJPEG call
per camera, on the GPU. Pass ``collate_fn=collate`` to the DataLoader to take
batches as fetched (required for the packed bytes; the default collation also
returns a batch of decoded images as fetched).

Datasets pickle as their sources and tables only: each DataLoader worker maps
the files itself the first time it reads (a map is never shared across processes).
"""

from __future__ import annotations

import copy as _copy
import functools
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import torch
    from torch.utils.data import Dataset
except ModuleNotFoundError as error:  # say which extra installs it
    from .._optional import missing

    raise missing("torch", "arrayio.robot.torch") from error

from ..kdb import (
    IMAGE_TABLE_DTYPE,
    JPEG_MAGIC,
    ImageDecodeError,
    ImageRecord,
    MissingImage,
    check_image_records,
    check_jpeg_headers,
    decode_image,
    decode_jpeg_into,
)
from ._arguments import camera_names, finite_number, seconds, whole_number
from ._nvjpeg import decode_groups
from ._shards import ShardSet, frame_offsets, prefetch_together
from .lerobot import TOLERANCE_S
from .torch_batch import (
    PACKED_PARTS,
    SCALE,
    ReadAheadBatch,
    ReadAheadSampler,
    Samples,
    as_device,
    batch_tensor,
    channels_first,
    check_image_format,
    collate,
    image_tensor,
    pack,
    packed_cameras,
    scratch_pixels,
    to_float,
)
from .torch_blocks import lease
from .torch_episode import EpisodeDataset
from .torch_item import STEP_FIELDS, ItemPlan, one_item
from .torch_mixture import BatchPerDataset, MixtureDataset

__all__ = ["BatchPerDataset", "EpisodeDataset", "FrameDataset", "MixtureDataset", "ReadAheadBatch", "ReadAheadSampler",
           "collate", "decode_batch", "plan_decode"]

DECODE_MODES = ("auto", "cpu", "none", "cuda")
LOW_DIM_FIELDS = ("state", "action", "reward", "terminal")


@dataclass(frozen=True)
class _Output:
    """One entry of an item: ``key`` from ``field`` at the current frame or over a window of frames."""

    key: str
    field: str
    frames: np.ndarray | None = None  # fixed frame offsets (the history/horizon shorthands)
    seconds: np.ndarray | None = None  # delta_timestamps, turned into frames with each episode's fps
    pad_key: str | None = None

    @property
    def windowed(self) -> bool:
        """True when the entry has a window axis (and a pad mask)."""
        return self.frames is not None or self.seconds is not None


class FrameDataset(Dataset):
    """Every frame of one or many .kdb shards: state, action, reward, terminal, camera images.

    ``source`` is a path, URL, glob, folder or a list of them, numbered as one
    dataset in the order given (globs sorted; URL globs such as
    ``s3://bucket/shards/*.kdb`` are listed through fsspec, with
    ``storage_options`` also used to open the remote shards). An item is a dict of tensors:
    ``state``, ``action``, ``reward``, ``terminal``, ``image.<camera>`` (C, H, W)
    for each camera in ``cameras`` (default: those of the first frame; ``[]``
    for none), and ``episode`` (position in its shard), ``frame``, ``shard``,
    ``index`` (global frame number).

    ``delta_timestamps={"state": [-0.1, 0.0], "action": [0.0, 0.05], "image.front": [-0.1, 0.0]}``
    turns those keys into windows (n, ...) in seconds at each episode's fps,
    with a ``<key>_is_pad`` (n,) mask where a window leaves the episode (the
    edge frame is repeated there). Without it, ``history`` and ``horizon`` are
    the shorthands: ``action`` (horizon, action_dim) with ``action_is_pad``,
    and ``state_history`` (history, state_dim) with ``state_history_is_pad``.

    ``decode="cpu"`` decodes images in the worker; ``"none"`` and ``"cuda"``
    leave each camera's stored bytes packed (``image.<camera>`` uint8,
    ``image.<camera>_offsets``, ``image.<camera>_sizes``) for :func:`decode_batch`.
    ``"auto"`` (the default) lets :class:`arrayio.robot.torch_loader.GpuLoader`
    choose between the two for its device, batch and worker count; read
    without such a loader it decodes in the worker, as ``"cpu"``.

    ``reuse_shared_memory`` (on by default): DataLoader workers decode images
    into shared-memory blocks that the main process has let go of (every
    tensor, view and array of their batch gone) instead of fresh ones, whose
    page faults cost more than the JPEG decode of 224x224 float images. The
    main process maps each such block once and keeps the map while its worker
    runs (dropped when a batch of a later worker arrives), so later batches in
    it pass no file descriptor and fault no pages. A block another process may
    read (sent through a multiprocessing queue or pipe, or alive when this
    process forks) never goes back. False gives every batch a fresh block.
    """

    def __init__(self, source: Any, cameras: Sequence[str] | None = None, history: int = 0, horizon: int = 1, *,
                 delta_timestamps: Mapping[str, Sequence[float]] | None = None, tolerance_s: float = TOLERANCE_S,
                 decode: str = "auto", image_format: str = "float", on_bad_image: str = "raise",
                 storage_options: dict | None = None, reuse_shared_memory: bool = True) -> None:
        history = whole_number("history", history, 0)
        horizon = whole_number("horizon", horizon, 1)
        if delta_timestamps is not None and (history or horizon != 1):
            raise ValueError("kdb: give delta_timestamps or the history/horizon shorthands, not both")
        if decode not in DECODE_MODES:
            raise ValueError(f"kdb: decode must be one of {DECODE_MODES}, got {decode!r}")
        check_image_format(image_format)
        self.history = history
        self.horizon = horizon
        self.decode = decode
        self.image_format = image_format
        self.reuse_shared_memory = bool(reuse_shared_memory)
        self.tolerance_s = finite_number("tolerance_s", tolerance_s)
        if delta_timestamps is not None and not isinstance(delta_timestamps, Mapping):
            raise TypeError(f"kdb: delta_timestamps must be a mapping {{key: [seconds]}}, got {delta_timestamps!r}")
        self.delta_timestamps = None if delta_timestamps is None else {
            key: seconds(key, values) for key, values in delta_timestamps.items()}
        named = None if cameras is None else camera_names(cameras)
        self.shards = ShardSet(source, on_bad_image=on_bad_image, need_fps=delta_timestamps is not None,
                               storage_options=storage_options)
        self.cameras = self.shards.cameras if named is None else named
        self.outputs = self._plan_outputs()
        self.item_plan = ItemPlan(self.outputs)
        self._offsets_by_fps: dict[float, dict[str, np.ndarray]] = {}
        if self.delta_timestamps is not None:
            assert self.shards.episode_fps is not None  # read because delta_timestamps is given
            for fps in np.unique(self.shards.episode_fps):
                self._window_frames(float(fps))

    def __repr__(self) -> str:
        return (f"FrameDataset({len(self.shards.sources)} shard(s), {len(self)} frames, cameras={self.cameras}, "
                f"decode={self.decode!r}, image_format={self.image_format!r})")

    @property
    def packs_images(self) -> bool:
        """True when batches carry the stored image bytes (decode "none" or "cuda") rather than pixels."""
        return self.decode in ("none", "cuda")

    @property
    def dims(self) -> dict[str, int]:
        """{"state": size, "action": size} of the first episode (a batch of one dataset has one size)."""
        return self.shards.dims

    def with_decode(self, decode: str, image_format: str | None = None, *,
                    reuse_shared_memory: bool | None = None) -> FrameDataset:
        """A copy of this dataset (sharing its tables) that decodes as ``decode`` (into ``image_format``, reusing
        shared memory as ``reuse_shared_memory`` says where given)."""
        if decode not in DECODE_MODES:
            raise ValueError(f"kdb: decode must be one of {DECODE_MODES}, got {decode!r}")
        copy = _copy.copy(self)
        copy.decode = decode
        if reuse_shared_memory is not None:
            copy.reuse_shared_memory = bool(reuse_shared_memory)
        if image_format is not None:
            check_image_format(image_format)
            copy.image_format = image_format
        return copy

    @property
    def first_frames(self) -> np.ndarray:
        """(episodes + 1,) int64: global number of each episode's first frame, then the total."""
        return self.shards.first_frames

    def _plan_outputs(self) -> list[_Output]:
        images = [f"image.{camera}" for camera in self.cameras]
        if self.delta_timestamps is None:
            outputs = [_Output("state", "state"),
                       _Output("action", "action", frames=np.arange(self.horizon), pad_key="action_is_pad"),
                       _Output("reward", "reward"), _Output("terminal", "terminal")]
            if self.history:
                outputs.append(_Output("state_history", "state", frames=np.arange(-self.history, 0),
                                       pad_key="state_history_is_pad"))
            return outputs + [_Output(key, key) for key in images]
        known = [*LOW_DIM_FIELDS, *images]
        unknown = sorted(set(self.delta_timestamps) - set(known))
        if unknown:
            raise ValueError(f"kdb: delta_timestamps keys {unknown} are not item keys; use any of {known}")
        return [_Output(key, key, seconds=np.asarray(self.delta_timestamps[key]), pad_key=f"{key}_is_pad")
                if key in self.delta_timestamps else _Output(key, key) for key in known]

    def _window_frames(self, fps: float) -> dict[str, np.ndarray]:
        """Frame offsets of every delta_timestamps window at ``fps`` (checked once per distinct fps)."""
        offsets = self._offsets_by_fps.get(fps)
        if offsets is None:
            offsets = self._offsets_by_fps[fps] = {
                output.key: frame_offsets(output.seconds, fps, self.tolerance_s, output.key)
                for output in self.outputs if output.seconds is not None}
        return offsets

    def __len__(self) -> int:
        return self.shards.num_frames

    def __getitem__(self, item: int) -> dict[str, Any]:
        if self.packs_images:
            return self.__getitems__([item])[0]
        made = one_item(self, item)
        if made is not None:
            return made
        # One item straight from the fetched arrays: a batch's tensors, then item 0 of each, cost as much
        # as a third of a 224x224 JPEG decode.
        arrays = _fetch_arrays([(self, [item], _ALL_ROWS)], 1, reuse=False)  # an item's block would be collated
        return {key: value[0] if isinstance(value, torch.Tensor) else torch.from_numpy(value[0, ...])
                for key, value in arrays.items()}

    def __getitems__(self, items: Sequence[int]) -> Samples:
        """A whole batch in one call (see :func:`collate`)."""
        return Samples(self._fetch(items), len(items), self.packed_keys())

    def packed_keys(self) -> list[str]:
        """The item keys that hold packed image bytes (none when images are decoded in the worker)."""
        return [f"image.{camera}" for camera in self.cameras] if self.packs_images else []

    # -- fetching --------------------------------------------------------------------------------

    def _fetch(self, items: Sequence[int]) -> dict[str, Any]:
        """The collated batch of global frames ``items`` (with the next batch read ahead where ``items`` is a
        :class:`ReadAheadBatch` that names it)."""
        self.read_ahead(getattr(items, "ahead", None), beside=items)
        return _fetch_parts([(self, items, _ALL_ROWS)], len(items))

    @property
    def remote(self) -> bool:
        """Whether the shards are read over the network (where reading the next batch ahead pays)."""
        return self.shards.remote

    def read_ahead(self, items: Sequence[int] | None, *, beside: Sequence[int]) -> None:
        """Wait for this process's last read-ahead (this batch's bytes may be on their way: never asked for
        twice), then start fetching the bytes of frames ``items`` (None: none) but those of ``beside``."""
        self.shards.wait_read_ahead()
        if items is not None:
            self.shards.read_ahead(items, images=bool(self.cameras), beside=beside)

    @staticmethod
    def fetch_parts(parts: list[tuple[FrameDataset, Sequence[int], np.ndarray]], size: int,
                    pad_to: Mapping[str, int] | None = None) -> dict[str, Any]:
        """One batch of frames of several datasets of one :meth:`batch_signature` (see ``_fetch_parts``)."""
        return _fetch_parts(parts, size, pad_to)

    def batch_signature(self) -> tuple:
        """What two datasets must share for their items to be fetched into one batch."""
        return (self.packs_images, self.image_format, tuple(self.cameras),
                tuple((output.key, output.field, output.pad_key) for output in self.outputs))

    def _rows(self, output: _Output, episodes: np.ndarray, local: np.ndarray,
              lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(clamped frame numbers (B, n), pad mask (B, n)) of one windowed output."""
        if output.frames is not None:
            wanted = local[:, None] + output.frames[None, :]
        elif output.seconds is not None:
            assert self.shards.episode_fps is not None  # read because delta_timestamps is given
            fps = self.shards.episode_fps[episodes]
            wanted = np.empty((len(local), len(output.seconds)), np.int64)
            for value in np.unique(fps):
                chosen = fps == value
                wanted[chosen] = local[chosen, None] + self._window_frames(float(value))[output.key][None, :]
        clamped = np.minimum(np.maximum(wanted, 0), lengths[:, None] - 1)  # np.clip's wrapper costs more here
        return clamped, clamped != wanted


_FIRST_ROW = np.zeros(1, np.int64)
_ALL_ROWS: Any = slice(None)  # the batch rows of a part that is the whole batch: a slice costs less than an index


def _fetch_parts(parts: list[tuple[FrameDataset, Sequence[int], np.ndarray]], size: int,
                 pad_to: Mapping[str, int] | None = None) -> dict[str, Any]:
    """One collated batch of ``size`` items: for each (dataset, items, batch rows) part, the dataset's
    frames ``items`` at those rows. Every dataset shares one signature (see ``batch_signature``).
    ``pad_to`` {field: size} zero-pads those fields' last axis, with a ``<key>_dim_mask`` per key."""
    return {key: torch.from_numpy(value) if isinstance(value, np.ndarray) else value
            for key, value in _fetch_arrays(parts, size, pad_to).items()}


def _fetch_arrays(parts: list[tuple[FrameDataset, Sequence[int], np.ndarray]], size: int,
                  pad_to: Mapping[str, int] | None = None, *, reuse: bool | None = None) -> dict[str, Any]:
    """``_fetch_parts`` with numpy arrays where it has tensors, except the images (batch tensors); ``reuse``
    overrides the first dataset's ``reuse_shared_memory``."""
    first = parts[0][0]
    reuse = first.reuse_shared_memory if reuse is None else reuse
    outputs = first.outputs
    sources = _Sources(len(parts))
    batch: dict[str, Any] = {output.key: None for output in outputs if output.field in STEP_FIELDS}
    pads: dict[str, np.ndarray] = {}
    dim_masks: dict[str, np.ndarray] = {}
    meta: dict[str, np.ndarray] = {}
    images = [output for output in outputs if output.field not in STEP_FIELDS]
    image_keys = {output.key for output in images}
    image_state: dict[str, _ImageGather] = {}
    located = []  # (frames, their episodes, those distinct) of each part
    for dataset, items, _ in parts:
        frames = dataset.shards.check_frames(items)
        episodes = dataset.shards.locate(frames)
        located.append((frames, episodes, _distinct(episodes)))
    # Every part's missing sections at once: a batch of N remote robots waits one round trip, not N.
    prefetch_together([(dataset.shards, unique) for (dataset, _, _), (_, _, unique) in zip(parts, located)],
                      images=bool(images))
    for part, ((dataset, _, rows_of), (frames, episodes, unique)) in enumerate(zip(parts, located)):
        shards = dataset.shards
        local = frames - shards.first_frames[episodes]
        # Outputs at the current frame share one (frames, pad) pair: in the episode, never padded.
        current = (local[:, None], np.zeros((len(local), 1), bool))
        rows = {output.key: dataset._rows(output, episodes, local, shards.episode_frames[episodes])
                if output.windowed else current for output in dataset.outputs}
        for output in dataset.outputs:
            window = rows[output.key][0].shape[1]
            if output.pad_key is not None:
                pad = pads.get(output.pad_key)
                if pad is None:
                    pad = pads[output.pad_key] = np.zeros((size, window), bool)
                if pad.shape[1] != window:
                    raise ValueError(f"kdb: datasets give {output.key} windows of {pad.shape[1]} and {window} frames")
                pad[rows_of] = rows[output.key][1]
            if output.key in image_keys and output.key not in image_state:
                image_state[output.key] = _ImageGather(size, window, output.field[len("image."):])
        if any(output.field in STEP_FIELDS for output in outputs):
            steps = shards.load_steps(unique)
            rows_at = steps.start[episodes][:, None]
            column = steps.columns["steps"]
            step_records: dict[int, np.ndarray] = {}  # the step records of each distinct frames array
            for output in outputs:
                if output.field not in STEP_FIELDS:
                    continue
                at = rows[output.key][0]
                records = step_records.get(id(at))
                if records is None:
                    records = step_records[id(at)] = column[rows_at + at]
                values = records[STEP_FIELDS[output.field]]
                width = pad_to.get(output.field) if pad_to else None
                if width is not None:
                    _put_padded(batch, dim_masks, output.key, values, rows_of, size, width)
                    continue
                if batch[output.key] is None:
                    batch[output.key] = np.empty((size, *values.shape[1:]), values.dtype)
                elif batch[output.key].shape[1:] != values.shape[1:]:
                    raise ValueError(f"kdb: {output.key} has shapes {batch[output.key].shape[1:]} and "
                                     f"{values.shape[1:]}; one batch needs one shape")
                batch[output.key][rows_of] = values
        if images:
            _gather_images(shards, part, episodes, unique, rows_of, images, rows, image_state, sources)
        for key, values in (("episode", shards.episode_position[episodes]), ("frame", local),
                            ("shard", shards.episode_shard[episodes]), ("index", frames)):
            if rows_of is _ALL_ROWS:  # the whole batch: the arrays themselves (int64 like the rest)
                meta[key] = values.astype(np.int64, copy=False)
            else:
                meta.setdefault(key, np.zeros(size, np.int64))[rows_of] = values
    for output in outputs:
        if output.field in STEP_FIELDS:
            values = batch[output.key]
            if output.field == "terminal":
                values = values != 0
            batch[output.key] = values if output.windowed else values[:, 0]
        else:
            gathered = image_state[output.key]
            if not first.packs_images:
                pixels = gathered.decode(sources, first.image_format, reuse=reuse)
                batch[output.key] = lease(channels_first(pixels if output.windowed else pixels[:, 0]))
            else:
                batch.update(gathered.packed(sources, output.key, output.windowed))
        if output.pad_key is not None:
            batch[output.pad_key] = pads[output.pad_key]
    batch.update(meta)
    batch.update({f"{key}_dim_mask": mask for key, mask in dim_masks.items()})
    return batch


def _put_padded(batch: dict[str, Any], masks: dict[str, np.ndarray], key: str, values: np.ndarray,
                rows_of: np.ndarray, size: int, width: int) -> None:
    """Write (n, window, d) ``values`` at batch rows ``rows_of`` of ``key`` (last axis ``width``, zeros past
    d) and mark the d real entries in ``masks[key]``."""
    found = values.shape[-1]
    if found > width:
        raise ValueError(f"kdb: {key} has {found} entries, more than the {width} it is padded to")
    if batch[key] is None:
        batch[key] = np.zeros((size, *values.shape[1:-1], width), values.dtype)
        masks[key] = np.zeros((size, width), bool)
    batch[key][rows_of, ..., :found] = values
    masks[key][rows_of, :found] = True


def _gather_images(shards: ShardSet, part: int, episodes: np.ndarray, unique: np.ndarray, rows_of: np.ndarray,
                   images: list[_Output], rows: dict[str, tuple[np.ndarray, np.ndarray]],
                   state: dict[str, _ImageGather], sources: _Sources) -> None:
    """Note where every image of the items at batch rows ``rows_of`` (global ``episodes``, ``unique`` the
    distinct ones) is stored."""
    table = shards.load_images(unique)
    rows_at = table.start[episodes][:, None]
    owners, owner_of = _distinct(shards.episode_shard[episodes], inverse=True)
    ids = np.array([sources.id(shards, part, shard) for shard in owners.tolist()], np.int64)[owner_of]
    for output in images:
        camera = output.field[len("image."):]
        frames = rows[output.key][0]
        column = table.columns.get(camera)
        records = column[rows_at + frames] if column is not None else None
        missing = np.ones(frames.shape, bool) if records is None else records["length"] < 0
        if missing.any():
            item, slot = (int(axis[0]) for axis in np.nonzero(missing))
            episode = int(episodes[item])
            raise MissingImage.at(f"shard {int(shards.episode_shard[episode])} episode "
                                  f"{int(shards.episode_position[episode])} frame {int(frames[item, slot])}", camera)
        gather = state[output.key]
        gather.records[rows_of] = records
        gather.source[rows_of] = ids[:, None]
        gather.frame_keys[rows_of] = (frames + shards.first_frames[episodes][:, None]) * sources.parts + part


def _distinct(values: np.ndarray, inverse: bool = False) -> Any:
    """np.unique(values[, return_inverse]), without its cost for one value (a plain __getitem__)."""
    if len(values) == 1:
        return (values, _FIRST_ROW) if inverse else values
    return np.unique(values, return_inverse=True) if inverse else np.unique(values)


class _Sources:
    """The shards a batch reads images from, numbered: (part, shard) -> a small id."""

    def __init__(self, parts: int) -> None:
        self.parts = parts
        self._ids: dict[tuple[int, int], int] = {}
        self._shards: list[tuple[ShardSet, int]] = []

    def id(self, shards: ShardSet, part: int, shard: int) -> int:
        """The id of ``shard`` of the shard set of ``part``."""
        key = (part, shard)
        number = self._ids.get(key)
        if number is None:
            number = self._ids[key] = len(self._shards)
            self._shards.append((shards, shard))
        return number

    def file(self, number: int) -> Any:
        """This process's open file of source ``number``."""
        shards, shard = self._shards[number]
        return shards.file(shard)


class _ImageGather:
    """The images of one output for a batch: where each is stored, then decoded into one
    (B, n, H, W, C) array or packed as stored bytes."""

    def __init__(self, size: int, window: int, camera: str) -> None:
        self.size, self.window, self.camera = size, window, camera
        self.records = np.zeros((size, window), IMAGE_TABLE_DTYPE)
        self.source = np.zeros((size, window), np.int64)
        self.frame_keys = np.zeros((size, window), np.int64)

    def packed(self, sources: _Sources, key: str, windowed: bool) -> dict[str, torch.Tensor]:
        """``key``: every stored image's bytes in one uint8 tensor; ``key_offsets``: (count + 1,) int64
        starts; ``key_sizes``: (B[, n], 4) int32 height, width, channels, format byte."""
        pieces = _stored_bytes(sources, self.source.reshape(-1), self.records.reshape(-1))
        records = self.records
        sizes = np.stack([records["height"], records["width"], records["channels"], records["format"]],
                         -1).astype(np.int32)
        return {**pack(key, pieces), key + "_sizes": torch.from_numpy(sizes if windowed else sizes[:, 0])}

    def decode(self, sources: _Sources, image_format: str, *, reuse: bool = False) -> torch.Tensor:
        """All images decoded into one (B, n, H, W, C) tensor (uint8, or float32 in [0, 1]), each distinct
        frame once."""
        records = self.records.reshape(-1)
        keys = self.frame_keys.reshape(-1)
        single = len(keys) == 1  # one item (a plain __getitem__): nothing to deduplicate or compare
        if single:
            places = first = inverse = _FIRST_ROW
        else:
            _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
            places = np.sort(first)  # decoded in batch order: the fresh batch memory is written front to back
        chosen = records[places]
        formats, channels, heights, widths = chosen["format"], chosen["channels"], chosen["height"], chosen["width"]
        decoded_channels = np.where((formats == 0) | (channels == 1) | (channels == 3) | (channels == 4), channels, 3)
        shape = (int(heights[0]), int(widths[0]), int(decoded_channels[0]))
        wrong = _FIRST_ROW[:0] if single else np.flatnonzero((heights != shape[0]) | (widths != shape[1]) |
                                                 (decoded_channels != shape[2]))
        if len(wrong):
            found = (int(heights[wrong[0]]), int(widths[wrong[0]]), int(decoded_channels[wrong[0]]))
            raise ValueError(f"kdb: camera {self.camera!r} has images of {found} and {shape} in one batch; a batch "
                             "needs one image size per camera")
        check_image_records(chosen["width"], chosen["height"], channels, chosen["length"], formats != 0,
                            chosen["offset"], f"image {self.camera!r}")  # the file's word, before the batch
        floats = image_format == "float"
        batch = batch_tensor((self.size * self.window, *shape), torch.float32 if floats else torch.uint8,
                             reuse=reuse)
        pixels = batch.numpy()
        scratch = scratch_pixels(shape) if floats else None
        owners = self.source.reshape(-1)[places]
        stored = _stored_bytes(sources, owners, chosen)
        for place, offset, length, fmt, owner, data in zip(places.tolist(), chosen["offset"].tolist(),
                                                           chosen["length"].tolist(), formats.tolist(),
                                                           owners.tolist(), stored):
            target = pixels[place]
            decoded = target if scratch is None else scratch
            if fmt == 0 and len(data) == decoded.size:  # raw pixels (their size checked above): no decode
                decoded = np.frombuffer(data, np.uint8).reshape(shape)
            elif not (fmt and decode_jpeg_into(data, decoded)):  # JPEG straight into place, else the reader
                record = records[place]
                image = ImageRecord(self.camera, int(record["width"]), int(record["height"]),
                                    int(record["channels"]), fmt, offset, length)
                decoded = sources.file(owner).decode_image(image)
                if decoded.shape != shape:
                    raise ValueError(f"kdb: camera {self.camera!r} at byte {offset} decodes to {decoded.shape}, "
                                     f"the batch holds {shape}")
            if floats:
                to_float(decoded, target)
            elif decoded is not target:
                target[...] = decoded
        repeats = _FIRST_ROW[:0] if single else np.flatnonzero(np.arange(len(inverse)) != first[inverse])
        if len(repeats):
            pixels[repeats] = pixels[first[inverse[repeats]]]
        return batch.reshape(self.size, self.window, *shape)


def _stored_bytes(sources: _Sources, owners: np.ndarray, records: np.ndarray) -> list[Any]:
    """The stored bytes of each record (read from source ``owners[i]``), one batched read per file."""
    distinct = _distinct(owners).tolist()
    if len(distinct) == 1:  # one file (always for one image)
        return sources.file(distinct[0]).image_bytes(records["offset"], records["length"])
    pieces: list[Any] = [None] * len(records)
    for owner in distinct:
        places = np.flatnonzero(owners == owner)
        chosen = records[places]
        for place, data in zip(places.tolist(), sources.file(owner).image_bytes(chosen["offset"], chosen["length"])):
            pieces[place] = data
    return pieces


# -- packed bytes ----------------------------------------------------------------------------------


def decode_batch(batch: Mapping[str, Any], device: Any = "cpu", *, image_format: str = "uint8",
                 fallback: bool = False, non_blocking: bool = True) -> dict[str, Any]:
    """Decode a batch's packed camera bytes into (B[, n], C, H, W) tensors on ``device``; other tensors move too.

    ``device="cuda"`` decodes each camera's JPEGs in one batched nvJPEG call
    (``torchvision.io.decode_jpeg``); PNG or raw images, or a machine without
    CUDA or torchvision, raise unless ``fallback=True``, which decodes those on
    the CPU instead (and keeps everything on the CPU when there is no CUDA).
    ``image_format="float"`` gives float32 in [0, 1].
    """
    return plan_decode(batch, device, image_format=image_format, fallback=fallback, non_blocking=non_blocking)()


def plan_decode(batch: Mapping[str, Any], device: Any = "cpu", *, image_format: str = "uint8",
                fallback: bool = False, non_blocking: bool = True,
                copies_now: bool = False) -> Callable[[], dict[str, Any]]:
    """:func:`decode_batch` in two steps: the checks and slicing on the host now, the decode and copies when
    the returned function is called (a loader checks batch n + 1 while nvJPEG decodes batch n).
    ``copies_now`` starts the other tensors' copies now, on the current stream, leaving the decode alone."""
    check_image_format(image_format)
    target = as_device(device)
    if target.type == "cuda" and not torch.cuda.is_available():
        if not fallback:
            raise ValueError(f"kdb: cannot decode on {target}: CUDA is not available (pass fallback=True to "
                             "decode on the CPU instead)")
        target = torch.device("cpu")
    cameras = packed_cameras(batch)
    if not cameras and any(key.startswith("image.") and isinstance(value, list) for key, value in batch.items()):
        raise ValueError("kdb: this batch holds lists of image bytes: build the DataLoader with "
                         "collate_fn=arrayio.robot.torch.collate to get them packed")
    hidden = {camera + part for camera in cameras for part in PACKED_PARTS}
    out: dict[str, Any] = {}  # a value, or the function that makes it when the decode is issued
    later: set[str] = set()
    nvjpeg = _NvjpegCall(target, image_format)
    for key, value in batch.items():
        if key in hidden:
            continue
        if key in cameras:
            out[key] = _plan_camera(batch, key, target, image_format, fallback, nvjpeg)
        elif isinstance(value, torch.Tensor) and copies_now:
            out[key] = value.to(target, non_blocking=non_blocking)
            continue
        elif isinstance(value, torch.Tensor):
            out[key] = functools.partial(value.to, target, non_blocking=non_blocking)
        else:
            out[key] = value
            continue
        later.add(key)
    return _Plan(out, later, nvjpeg)


class _Plan:
    """A batch's decode and copies, issued when called; ``decode_s``: the seconds its nvJPEG calls took then
    (their host stage, and taking the GIL back after)."""

    def __init__(self, out: dict[str, Any], later: set[str], nvjpeg: _NvjpegCall) -> None:
        self.out, self.later, self.nvjpeg = out, later, nvjpeg

    def __call__(self) -> dict[str, Any]:
        return {key: value() if key in self.later else value for key, value in self.out.items()}

    @property
    def decode_s(self) -> float:
        """Seconds spent in nvJPEG by the last call."""
        return self.nvjpeg.decode_s


_SCALE = torch.tensor(SCALE, dtype=torch.float32)  # a 0-d CPU tensor: uint8 x it gives float32 on any device


class _NvjpegCall:
    """The JPEGs of every camera of a batch, decoded in one nvJPEG call per channel mode when first asked for,
    then stacked and made floats once per image size, in the same compiled call (see :mod:`._nvjpeg`)."""

    def __init__(self, device: torch.device, image_format: str) -> None:
        self.device, self.image_format = device, image_format
        self.cameras: dict[int, list[tuple[torch.Tensor, list[int]]]] = {}  # mode -> (packed bytes, lengths)
        self.groups: dict[tuple[int, int, int], list[int]] = {}  # (mode, height, width) -> its cameras, by number
        self.stacked: dict[tuple[int, int, int], torch.Tensor] = {}
        self.decode_s = 0.0

    def add(self, data: torch.Tensor, lengths: list[int], channels: int, height: int,
            width: int) -> Callable[[], torch.Tensor]:
        """Queue the JPEGs ``data`` cut at ``lengths``; the returned function gives their (n, C, H, W) images."""
        mode = 1 if channels == 1 else 3
        cameras = self.cameras.setdefault(mode, [])
        group = self.groups.setdefault((mode, height, width), [])
        first = sum(len(cameras[number][1]) for number in group)
        group.append(len(cameras))
        cameras.append((data, lengths))
        return functools.partial(self._images, (mode, height, width), first, first + len(lengths))

    def _images(self, shape: tuple[int, int, int], start: int, stop: int) -> torch.Tensor:
        if shape not in self.stacked:
            mode = shape[0]
            shapes = [key for key in self.groups if key[0] == mode]
            datas, lengths = (list(column) for column in zip(*self.cameras[mode]))
            started = time.perf_counter()
            stacks = decode_groups(datas, lengths, [self.groups[key] for key in shapes], [key[1:] for key in shapes],
                                   mode, self.device, _SCALE if self.image_format == "float" else None)
            self.decode_s += time.perf_counter() - started
            self.stacked.update(zip(shapes, stacks))
        return self.stacked[shape][start:stop]


def _plan_camera(batch: Mapping[str, Any], key: str, device: torch.device, image_format: str,
                 fallback: bool, nvjpeg: _NvjpegCall) -> Callable[[], torch.Tensor]:
    data, offsets, sizes = batch[key], batch[key + "_offsets"], batch[key + "_sizes"]
    lead = tuple(sizes.shape[:-1])
    flat_sizes = sizes.reshape(-1, 4).numpy()
    shapes = {tuple(row) for row in flat_sizes[:, :3].tolist()}
    if len(shapes) > 1:
        raise ValueError(f"kdb: {key} holds images of several sizes {sorted(shapes)}; a batch needs one size")
    height, width, channels = shapes.pop() if shapes else (0, 0, 3)
    starts = offsets.numpy()  # the records' sizes are the file's word: checked before any pixel is allocated
    check_image_records(flat_sizes[:, 1], flat_sizes[:, 0], flat_sizes[:, 2], np.diff(starts),
                        flat_sizes[:, 3] != 0, starts[:-1], key)
    if device.type == "cuda":
        problem = _cuda_problem(data, starts, flat_sizes)
        if problem is None:
            packed = data[int(starts[0]):int(starts[-1])] if len(starts) > 1 else data[:0]
            return functools.partial(_shaped, nvjpeg.add(packed, np.diff(starts).tolist(), channels, height, width),
                                     lead, channels, device, image_format)
        if not fallback:
            raise ValueError(f"kdb: cannot decode {key} on {device}: {problem} (pass fallback=True to decode "
                             "on the CPU instead)")

    def on_cpu() -> torch.Tensor:
        pixels = _decode_cpu(key, data, offsets, flat_sizes, height, width, channels)
        return image_tensor(pixels.reshape(*lead, *pixels.shape[1:]), image_format).to(device)
    return on_cpu


def _decode_cpu(key: str, data: torch.Tensor, offsets: torch.Tensor, sizes: np.ndarray, height: int, width: int,
                channels: int) -> np.ndarray:
    flat, starts = data.numpy(), offsets.tolist()
    decoded_channels = channels if channels in (1, 3, 4) else 3
    pixels = np.empty((len(sizes), height, width, decoded_channels), np.uint8)
    for slot, (start, end) in enumerate(itertools.pairwise(starts)):
        piece = flat[start:end]
        if sizes[slot, 3] == 0:  # a raw record: the pixels themselves
            if len(piece) != height * width * channels:
                raise ValueError(f"kdb: {key} image {slot} has {len(piece)} raw bytes, expected "
                                 f"{height}x{width}x{channels}")
            pixels[slot] = piece.reshape(height, width, channels)
            continue
        if decode_jpeg_into(piece, pixels[slot]):
            continue
        try:
            pixels[slot] = decode_image(piece.data, width, height, channels)
        except ValueError as error:
            raise ImageDecodeError(format="kdb", field=f"{key} image {slot}", offset=start,
                                   expected="a decodable JPEG or PNG", found=str(error)) from None
    return pixels


def _cuda_problem(data: torch.Tensor, starts: np.ndarray, sizes: np.ndarray) -> str | None:
    """Why nvJPEG cannot decode these images here, or None when it can."""
    if not torch.cuda.is_available():
        return "CUDA is not available"
    try:
        import torchvision.io  # noqa: F401 - imported here only: its CPU wheels clash with CPU torch
    except Exception as error:  # noqa: BLE001 - ImportError, or torchvision's operator registration failing
        return f"torchvision is not usable ({type(error).__name__}: {error})"
    flat = data.numpy()
    if len(starts) and not 0 <= int(starts[0]) <= int(starts[-1]) <= len(flat):
        return f"the offsets ({int(starts[0])} to {int(starts[-1])}) run past the {len(flat)} packed bytes"
    firsts, lengths = starts[:-1], np.diff(starts)
    is_jpeg = (sizes[:, 3] != 0) & (lengths >= len(JPEG_MAGIC))
    for number, byte in enumerate(JPEG_MAGIC):
        is_jpeg[is_jpeg] &= flat[firsts[is_jpeg] + number] == byte
    if not is_jpeg.all():
        return f"image {int(np.argmin(is_jpeg))} is not a JPEG (nvJPEG decodes JPEG only)"
    check_jpeg_headers(flat, starts, sizes[:, 1], sizes[:, 0])  # nvJPEG sizes its output from the header
    return None


def _shaped(images_of: Callable[[], torch.Tensor], lead: tuple[int, ...], channels: int, device: torch.device,
           image_format: str) -> torch.Tensor:
    if not int(np.prod(lead)):
        dtype = torch.float32 if image_format == "float" else torch.uint8
        return torch.empty((*lead, channels, 0, 0), dtype=dtype, device=device)
    images = images_of()
    return images if len(lead) == 1 else images.reshape(*lead, *images.shape[1:])
