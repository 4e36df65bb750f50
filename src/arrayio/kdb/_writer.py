"""Writing .kdb files: reserve the header, stream episodes, append the index,
patch the header, all into a temporary file renamed over the target at the end.

Unlike the reference writer, every narrowed integer is range-checked, every
frame's state and action length is checked, empty episodes are refused and the
image encoding is stated by the caller, never guessed from the bytes. A failed
episode poisons the writer so that a half-written episode can never be
published: closing it then discards the temporary file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .._binary import U64_MAX
from .._binary import Writer as StreamWriter
from .._edge import local_path, open_output
from .._names import path_segment
from ..errors import WriteError
from . import _images
from ._codec import check_f32, encode_meta, encode_utf8, step_dtype
from ._images import EncodedImage
from ._records import (
    CAMERA_COUNT,
    HEADER,
    HEADER_SIZE,
    IMAGE_COMPRESSED,
    IMAGE_HEADER,
    IMAGE_RAW,
    INDEX_ENTRY,
    MAGIC,
    STRING_LENGTH,
    U8_MAX,
    U16_MAX,
    U32_MAX,
    VERSION_MAJOR,
    VERSION_MINOR,
)

ImageInput = Union[np.ndarray, EncodedImage]
COMPRESSIONS = (None, "jpeg", "png")
LAYOUTS = (None, "hwc", "chw")
CHANNEL_COUNTS = (1, 3, 4)  # grey, RGB, RGBA: what a channels axis holds
# The streaming form keeps at most this much of one episode in memory, the rest in a temporary file.
SPOOL_BYTES = 32 << 20


@dataclass
class _OpenEpisode:
    """The streaming episode being written: its metadata and its two spooled sections."""

    state_dim: int
    action_dim: int
    meta: dict[str, Any]
    steps: Any
    images: Any
    num_frames: int = 0
    episode_id: int | None = None


class Writer:
    """Writes a new .kdb file; use as a context manager (the file appears only on a clean exit).

    ``compress`` ("jpeg" or "png") encodes raw uint8 images given to this
    writer; already-encoded :class:`EncodedImage` values are stored as given.
    ``layout`` is how pixel arrays are laid out: kdb stores (H, W, C); ``"chw"``
    takes channels-first images (PyTorch's (C, H, W), (frames, C, H, W)) and
    transposes them; the default refuses an image that looks channels-first
    (1, 3 or 4 rows and no such channel count) rather than store it as a
    3-row image; ``"hwc"`` stores every image as given.
    ``target`` is a path (an existing file is replaced when the writer closes; the CLI asks for
    ``--force`` first), a URL (with ``storage_options``), an fd or a binary file object.
    """

    def __init__(self, target: Any, *, compress: str | None = None, quality: int = 90,
                 created_timestamp: int | None = None, layout: str | None = None,
                 storage_options: dict | None = None) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"kdb: layout must be one of {LAYOUTS}, got {layout!r}")
        if compress not in COMPRESSIONS:
            raise ValueError(f"kdb: compress must be one of {COMPRESSIONS}, got {compress!r}")
        if isinstance(quality, bool) or not isinstance(quality, (int, np.integer)) or not 1 <= quality <= 100:
            raise ValueError(f"kdb: quality must be a whole number 1..100, got {quality!r}")  # 90.5 was taken as 90
        if created_timestamp is not None and not 0 <= int(created_timestamp) <= U64_MAX:
            raise ValueError(f"kdb: created_timestamp must be 0..2**64-1 Unix seconds, got {created_timestamp}")
        self.compress = compress
        self.layout = layout
        self.quality = int(quality)
        self.created_timestamp = None if created_timestamp is None else int(created_timestamp)
        local = local_path(target)
        self._folder = os.path.dirname(os.path.abspath(local)) if local is not None else None
        self._name = os.fsdecode(target) if isinstance(target, (str, bytes, os.PathLike)) else repr(target)
        self._stack = contextlib.ExitStack()
        self._stream = self._stack.enter_context(open_output(target, storage_options))
        self._out = StreamWriter(self._stream)
        self._header_at = self._out.reserve(HEADER_SIZE)
        self._entries: list[bytes] = []
        self._total_frames = 0
        self._episode: _OpenEpisode | None = None
        self._failed: BaseException | None = None
        self.closed = False

    # -- context -----------------------------------------------------------------------------------

    def __enter__(self) -> Writer:
        return self

    def __exit__(self, kind: Any, error: Any, traceback: Any) -> None:
        if error is not None:
            self.abort(error)
        else:
            self.close()

    def __len__(self) -> int:
        return len(self._entries)

    def close(self) -> None:
        """Write the index, patch the header and publish the file (atomically for paths)."""
        if self.closed:
            return
        if self._episode is not None:
            self.abort(RuntimeError("kdb: close() with an episode begun but not ended"))
            raise RuntimeError("kdb: close() with an episode begun but not ended; the file was discarded")
        if self._failed is not None:
            self.abort(self._failed)
            raise RuntimeError("kdb: an earlier episode failed half-way; the file was discarded") from self._failed
        timestamp = int(time.time()) if self.created_timestamp is None else self.created_timestamp
        try:
            index_offset = self._out.position
            self._out.write(b"".join(self._entries))
            self._out.patch(self._header_at, HEADER.pack(
                magic=MAGIC, version_major=VERSION_MAJOR, version_minor=VERSION_MINOR,
                num_episodes=len(self._entries), num_frames=self._total_frames, index_offset=index_offset,
                index_length=len(self._entries) * INDEX_ENTRY.size, created_timestamp=timestamp))
        except BaseException as error:
            self.abort(error)
            raise
        self.closed = True
        self._close_episode_spools()
        self._stack.close()

    def abort(self, error: BaseException | None = None) -> None:
        """Discard everything written (a path target is left untouched)."""
        if self.closed:
            return
        self.closed = True
        self._close_episode_spools()
        failure = error if error is not None else RuntimeError("kdb: writer aborted")
        with contextlib.suppress(type(failure)):
            self._stack.__exit__(type(failure), failure, failure.__traceback__)

    # -- whole episodes ----------------------------------------------------------------------------

    def add_episode(self, states: Any, actions: Any, *, rewards: Any = None, terminals: Any = None,
                    images: Mapping[str, Any] | None = None, embodiment: str = "", task: str = "",
                    fps: float = 10.0, success: bool | None = None, total_reward: float | None = None) -> int:
        """Write one episode from (frames, dim) arrays; returns its episode id.

        ``images`` maps camera name to a (frames, H, W[, C]) uint8 array or a
        sequence of per-frame arrays / :class:`EncodedImage` values.
        """
        self._check_usable()
        states = _matrix(states, "states")
        actions = _matrix(actions, "actions")
        frames = len(states)
        _check_frames(frames)
        if len(actions) != frames:
            raise ValueError(f"kdb: actions has {len(actions)} frames, states has {frames}")
        rewards = _vector(rewards, frames, "rewards", np.float32)
        terminals = _vector(terminals, frames, "terminals", bool)
        _check_dim(states.shape[1], "state_dim")
        _check_dim(actions.shape[1], "action_dim")
        cameras = _camera_streams(images or {}, frames)
        meta = encode_meta(embodiment, task, check_f32(fps, "fps"), _success(success),
                           None if total_reward is None else check_f32(total_reward, "total_reward"))
        steps = np.empty(frames, dtype=step_dtype(states.shape[1], actions.shape[1]))
        steps["state"], steps["action"] = states, actions
        steps["reward"], steps["is_terminal"] = rewards, terminals
        prepared = [[(name, self._prepare_image(stream[t], name, t)) for name, stream in cameras.items()]
                    for t in range(frames)] if cameras else None
        return self._guarded(self._write_episode, meta, steps, prepared, frames,
                             states.shape[1], actions.shape[1])

    def _write_episode(self, meta: bytes, steps: np.ndarray, prepared: Any, frames: int,
                       state_dim: int, action_dim: int) -> int:
        meta_offset = self._out.position
        self._out.write(meta)
        actions_offset = self._out.position
        self._out.write(steps)
        images_offset = self._out.position
        no_cameras = CAMERA_COUNT.pack(num_cameras=0)
        for t in range(frames):
            if prepared is None:
                self._out.write(no_cameras)
                continue
            self._out.write(CAMERA_COUNT.pack(num_cameras=len(prepared[t])))
            for name, (header, data) in prepared[t]:
                self._out.write(_camera_prefix(name) + header)
                self._out.write(data)
        return self._add_entry(frames, state_dim, action_dim, meta_offset, len(meta), actions_offset,
                               images_offset - actions_offset, images_offset)

    # -- streaming episodes --------------------------------------------------------------------------

    def begin_episode(self, *, state_dim: int, action_dim: int, embodiment: str = "", task: str = "",
                      fps: float = 10.0, success: bool | None = None, total_reward: float | None = None,
                      episode_id: int | None = None) -> None:
        """Start an episode written frame by frame with :meth:`add_frame`; memory stays bounded.

        ``episode_id`` is stored as given (default: the episode's position); ids should stay unique.
        """
        self._check_usable()
        if self._episode is not None:
            raise RuntimeError("kdb: begin_episode() while another episode is open; call end_episode() first")
        _check_dim(state_dim, "state_dim")
        _check_dim(action_dim, "action_dim")
        meta: dict[str, Any] = {
            "embodiment": embodiment, "task": task, "fps": check_f32(fps, "fps"), "success": _success(success),
            "total_reward": None if total_reward is None else check_f32(total_reward, "total_reward")}
        encode_meta(**meta)
        if episode_id is not None and not 0 <= int(episode_id) <= U64_MAX:
            raise ValueError(f"kdb: episode_id must be 0..2**64-1, got {episode_id}")
        self._episode = _OpenEpisode(int(state_dim), int(action_dim), meta, self._spool(), self._spool(),
                                     episode_id=None if episode_id is None else int(episode_id))

    def add_frame(self, state: Any, action: Any, *, reward: float = 0.0, terminal: bool = False,
                  images: Mapping[str, ImageInput] | None = None) -> None:
        """Append one frame to the open episode."""
        episode = self._episode
        if episode is None:
            raise RuntimeError("kdb: add_frame() without begin_episode()")
        _check_frames(episode.num_frames + 1)
        state = _row(state, episode.state_dim, "state", episode.num_frames)
        action = _row(action, episode.action_dim, "action", episode.num_frames)
        step = np.empty(1, dtype=step_dtype(episode.state_dim, episode.action_dim))
        step["state"], step["action"] = state, action
        step["reward"], step["is_terminal"] = check_f32(reward, "reward"), bool(terminal)
        images = dict(images or {})
        _check_camera_count(len(images))
        for name in images:  # before anything is spooled: a refused name leaves the episode as it was
            _camera_prefix(name)
        prepared = [(name, self._prepare_image(image, name, episode.num_frames)) for name, image in images.items()]
        self._guarded(self._spool_frame, episode, step, prepared)

    def _spool_frame(self, episode: _OpenEpisode, step: np.ndarray, prepared: list) -> int:
        """Add one frame to the episode's spools (a temporary file beside the target past SPOOL_BYTES)."""
        try:
            episode.steps.write(step.data.cast("B"))
            episode.images.write(CAMERA_COUNT.pack(num_cameras=len(prepared)))
            for name, (header, data) in prepared:
                episode.images.write(_camera_prefix(name) + header)
                episode.images.write(data)
        except OSError as error:
            raise WriteError("write", self._name, error) from error
        episode.num_frames += 1
        return episode.num_frames

    def end_episode(self, *, success: bool | None = None, total_reward: float | None = None) -> int:
        """Finish the open episode (optionally now stating success/total_reward); returns its id."""
        episode = self._episode
        if episode is None:
            raise RuntimeError("kdb: end_episode() without begin_episode()")
        if episode.num_frames == 0:
            raise ValueError("kdb: an episode needs at least one frame (the format cannot hold empty episodes)")
        if success is not None:
            episode.meta["success"] = _success(success)
        if total_reward is not None:
            episode.meta["total_reward"] = check_f32(total_reward, "total_reward")
        meta = encode_meta(**episode.meta)
        self._episode = None
        try:
            return self._guarded(self._write_spooled, episode, meta)
        finally:
            episode.steps.close()
            episode.images.close()

    def _write_spooled(self, episode: _OpenEpisode, meta: bytes) -> int:
        meta_offset = self._out.position
        self._out.write(meta)
        actions_offset = self._out.position
        self._copy(episode.steps)
        images_offset = self._out.position
        self._copy(episode.images)
        return self._add_entry(episode.num_frames, episode.state_dim, episode.action_dim, meta_offset, len(meta),
                               actions_offset, images_offset - actions_offset, images_offset, episode.episode_id)

    # -- shared pieces ------------------------------------------------------------------------------

    def _add_entry(self, frames: int, state_dim: int, action_dim: int, meta_offset: int, meta_length: int,
                   actions_offset: int, actions_length: int, images_offset: int, episode_id: int | None = None) -> int:
        episode_id = len(self._entries) if episode_id is None else episode_id
        self._entries.append(INDEX_ENTRY.pack(
            episode_id=episode_id, num_frames=frames, action_dim=action_dim, state_dim=state_dim,
            actions_offset=actions_offset, actions_length=actions_length, images_offset=images_offset,
            images_length=self._out.position - images_offset, meta_offset=meta_offset, meta_length=meta_length))
        self._total_frames += frames
        return episode_id

    def _prepare_image(self, image: ImageInput, camera: str, frame: int) -> tuple[bytes, Any]:
        """The image header and the data to store for one camera image."""
        where = f"camera {camera!r} frame {frame}"
        data: Any  # encoded bytes, or the pixel array itself
        if isinstance(image, EncodedImage):
            image = image.with_dimensions()
            assert image.width is not None and image.height is not None and image.channels is not None  # filled
            width, height, channels, kind, data = (image.width, image.height, image.channels, IMAGE_COMPRESSED,
                                                   image.data)
        elif isinstance(image, (bytes, bytearray, memoryview)):
            raise TypeError(f"kdb: {where}: give encoded bytes as EncodedImage(data, 'jpeg'|'png') "
                            "so the encoding is stated, not guessed")
        else:
            pixels = np.asarray(image)
            if pixels.dtype != np.uint8 or pixels.ndim not in (2, 3):
                raise ValueError(f"kdb: {where}: expected a (H, W) or (H, W, C) uint8 array, "
                                 f"got {pixels.dtype} {pixels.shape}")
            pixels = self._channels_last(pixels, where)
            if pixels.ndim == 2:
                pixels = pixels[:, :, None]
            height, width, channels = pixels.shape
            if self.compress is not None and _images.can_encode(self.compress, channels) and pixels.size:
                kind, data = IMAGE_COMPRESSED, _images.encode(pixels, self.compress, self.quality)
            else:
                kind, data = IMAGE_RAW, np.ascontiguousarray(pixels)
        for name, value, limit in (("width", width, U32_MAX), ("height", height, U32_MAX),
                                   ("channels", channels, U8_MAX), ("data_len", memoryview(data).nbytes, U32_MAX)):
            if not 0 <= value <= limit:
                raise ValueError(f"kdb: {where}: {name} = {value} does not fit its field (0..{limit})")
        return IMAGE_HEADER.pack(width=width, height=height, channels=channels, format=kind,
                                 data_len=memoryview(data).nbytes), data

    def _channels_last(self, pixels: np.ndarray, where: str) -> np.ndarray:
        """One image as (H, W[, C]): transposed from (C, H, W) under layout "chw"; refused when it looks
        channels-first and no layout was named."""
        if pixels.ndim != 3:
            return pixels
        if self.layout == "chw":
            return pixels.transpose(1, 2, 0)
        if self.layout is None and pixels.shape[0] in CHANNEL_COUNTS and pixels.shape[2] not in CHANNEL_COUNTS:
            raise ValueError(
                f"kdb: {where}: shape {pixels.shape} looks channels-first (C, H, W), as PyTorch keeps images; kdb "
                f"stores (H, W, C). Transpose it (images.transpose(0, 2, 3, 1) for (frames, C, H, W), "
                f"image.transpose(1, 2, 0) for one image), or open the Writer with layout='chw' to have it "
                f"transposed (layout='hwc' stores images as given)")
        return pixels

    def _guarded(self, action: Any, *args: Any) -> int:
        """Run a write; any failure half-way poisons the writer (the file will be discarded)."""
        try:
            return action(*args)
        except BaseException as error:
            self._failed = error
            raise

    def _check_usable(self) -> None:
        if self.closed:
            raise RuntimeError("kdb: the writer is closed")
        if self._failed is not None:
            raise RuntimeError("kdb: an earlier episode failed half-way; this writer cannot continue")
        if self._episode is not None:
            raise RuntimeError("kdb: an episode is open; call end_episode() first")

    def _spool(self) -> Any:
        return tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES, dir=self._folder)

    def _copy(self, spool: Any) -> None:
        spool.seek(0)
        shutil.copyfileobj(spool, _Sink(self._out), 1 << 20)

    def _close_episode_spools(self) -> None:
        if self._episode is not None:
            self._episode.steps.close()
            self._episode.images.close()
            self._episode = None


class _Sink:
    """A file-like front for the stream writer, so spools can be copied in bounded chunks."""

    def __init__(self, out: StreamWriter) -> None:
        self._out = out

    def write(self, data: Any) -> int:
        """Write ``data`` through the stream writer (which tracks the position)."""
        return self._out.write(data)


def _float32(values: Any, name: str) -> np.ndarray:
    """``values`` as float32; ragged input and finite values beyond the f32 range raise."""
    try:
        array = np.asarray(values)
    except ValueError as error:
        raise ValueError(f"kdb: {name} is ragged ({error}); every frame needs the same length") from None
    if array.dtype == np.float32:
        return array
    if array.dtype.kind not in "biuf":
        raise ValueError(f"kdb: {name} must be numeric, got {array.dtype}")
    wide = array.astype(np.float64)
    with np.errstate(invalid="ignore"):
        beyond = np.isfinite(wide) & (np.abs(wide) > np.finfo(np.float32).max)
    if beyond.any():
        raise ValueError(f"kdb: {name} holds {wide[beyond][0]}, beyond the 32-bit float range")
    return wide.astype(np.float32)


def _matrix(values: Any, name: str) -> np.ndarray:
    """A (frames, dim) float32 array; ragged input raises instead of misaligning later frames."""
    array = _float32(values, name)
    if array.ndim == 1:
        raise ValueError(f"kdb: {name} must be (frames, dim); got shape {array.shape} "
                         f"(use shape ({array.shape[0]}, 1) for a 1-d {name[:-1]})")
    if array.ndim != 2:
        raise ValueError(f"kdb: {name} must be (frames, dim); got shape {array.shape}")
    return array


def _row(values: Any, dim: int, name: str, frame: int) -> np.ndarray:
    array = _float32(values, f"frame {frame} {name}").reshape(-1)
    if array.shape != (dim,):
        raise ValueError(f"kdb: frame {frame} {name} has {array.size} values, the episode's {name}_dim is {dim}")
    return array


def _vector(values: Any, frames: int, name: str, dtype: Any) -> np.ndarray:
    if values is None:
        return np.zeros(frames, dtype=dtype)
    array = _float32(values, name) if dtype == np.float32 else np.asarray(values, dtype=dtype)
    if array.shape != (frames,):
        raise ValueError(f"kdb: {name} must have shape ({frames},), got {array.shape}")
    return array


def _check_frames(frames: int) -> None:
    if frames == 0:
        raise ValueError("kdb: an episode needs at least one frame (the format cannot hold empty episodes)")
    if frames > U32_MAX:
        raise ValueError(f"kdb: {frames} frames do not fit the u32 num_frames field")


def _check_dim(dim: int, name: str) -> None:
    if not 0 <= int(dim) <= U16_MAX:
        raise ValueError(f"kdb: {name} = {dim} does not fit its u16 field (0..{U16_MAX})")


def _check_camera_count(count: int) -> None:
    if count > U16_MAX:
        raise ValueError(f"kdb: {count} cameras in one frame; num_cameras is a u16 (at most {U16_MAX})")


def _success(value: Any) -> bool | None:
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else bool(value)
    raise TypeError(f"kdb: success must be True, False or None, got {value!r}")


def _camera_prefix(name: str) -> bytes:
    # A camera becomes a folder or member name in every export: refuse what no reader could map.
    path_segment(name, "kdb: camera name")
    raw = encode_utf8(name, f"camera name {name[:40]!r}", U16_MAX)
    return STRING_LENGTH.pack(length=len(raw)) + raw


def _camera_streams(images: Mapping[str, Any], frames: int) -> dict[str, Sequence[Any]]:
    """Check each camera's per-frame sequence (names encodable, one image per frame)."""
    _check_camera_count(len(images))
    streams = {}
    for name, stream in images.items():
        _camera_prefix(name)
        if isinstance(stream, np.ndarray) and stream.ndim < 3:
            raise ValueError(f"kdb: camera {name!r} must be (frames, H, W[, C]); got shape {stream.shape}")
        if len(stream) != frames:
            raise ValueError(f"kdb: camera {name!r} has {len(stream)} images for {frames} frames")
        streams[name] = stream
    return streams
