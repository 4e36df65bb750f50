"""The tree of a kdb file: the episode table at the root and ``episodes/<episode_id>/...``.

Every chunk is computed: steps interleave state, action, reward and terminal
per frame (no plain range per field), camera frames are JPEG/PNG or raw
records spread through the file, and the table comes from episode metadata.
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from .._names import path_segment
from .._tree import Array, Group, jsonable, rows_per_chunk
from ..errors import UnsupportedError
from ._codec import step_dtype
from ._images import check_decoded_size
from ._reader import EpisodeImages, KdbFile


def tree(kdb: KdbFile) -> Group:
    """The episode table and one group per episode."""
    metas = kdb.read_metas()
    kdb.prefetch_first_frames()  # each episode's cameras, from its first frame: not its whole sections
    ids = [meta.episode_id for meta in metas]
    duplicated = {episode_id for episode_id, count in collections.Counter(ids).items() if count > 1}
    names = [f"{meta.episode_id}@{position}" if meta.episode_id in duplicated else str(meta.episode_id)
             for position, meta in enumerate(metas)]
    count = len(metas)

    def column(values: list, dtype: Any, strings: bool = False) -> Array:
        data = np.array(values, dtype=object if strings else dtype)
        return Array((count,), data.dtype, (max(count, 1),), ("episode",), {}, lambda coords: data,
                     strings=strings, why_computed="a column of the episode table, made from the episodes' metadata")

    children: dict[str, Group | Array] = {
        "episode_id": column(ids, np.uint64),  # the index field is a u8: ids past 2**63 are valid
        "num_frames": column([meta.num_frames for meta in metas], np.int64),
        "state_dim": column([meta.state_dim for meta in metas], np.int64),
        "action_dim": column([meta.action_dim for meta in metas], np.int64),
        "fps": column([meta.fps for meta in metas], np.float64),
        "success": column([-1 if meta.success is None else int(meta.success) for meta in metas], np.int8),
        "total_reward": column([np.nan if meta.total_reward is None else meta.total_reward for meta in metas],
                               np.float64),
        "task": column([meta.task for meta in metas], None, strings=True),
        "embodiment": column([meta.embodiment for meta in metas], None, strings=True),
    }
    episodes: dict[str, Group | Array] = {name: _episode_group(kdb, position, meta)
                                          for position, (meta, name) in enumerate(zip(metas, names))}
    children["episodes"] = Group({}, episodes)
    return Group({"arrayio_format": kdb.format, "version": kdb.version, "episode_names": names}, children)


def _episode_group(kdb: KdbFile, position: int, meta: Any) -> Group:
    entry = kdb.entry(position)
    steps = step_dtype(entry.state_dim, entry.action_dim)
    frames = int(entry.num_frames)
    step = min(rows_per_chunk(steps.itemsize), max(frames, 1))
    attributes = jsonable(meta.as_dict())

    def field_array(name: str, column: str, width: int | None) -> Array:
        dtype = np.dtype("u1") if column == "is_terminal" else np.dtype("<f4")
        shape = (frames,) if width is None else (frames, width)
        chunks = (step,) if width is None else (step, max(width, 1))

        def read(coords: tuple[int, ...]) -> np.ndarray:
            low = coords[0] * step
            high = min(low + step, frames)
            rows = kdb.source.array(entry.actions_offset + low * steps.itemsize, high - low, steps,
                                    f"episode {position} state/action section")
            return np.ascontiguousarray(rows[column])

        dims = ("frame",) if width is None else ("frame", f"{name}_dim")
        return Array(shape, dtype, chunks, dims, {}, read, why_computed="kdb steps interleave state, action, reward "
                     "and terminal per frame: no plain range per field")

    cameras: dict[str, Group | Array] = {}
    # Caches each frame's records once parsed; not read_episode, which fetches a remote episode's whole
    # sections (the tree of a 52 MB file over HTTP downloaded all of it).
    episode_images = EpisodeImages(kdb, position, kdb.on_bad_image)
    # The cameras of the first frame: finding every camera would walk every frame's records, which
    # remotely reads the whole image section at open. A frame without one of them reads as zeros.
    for record in episode_images.records(0) if frames else []:
        name = path_segment(record.camera, "kdb camera name", escape=True)
        if name not in cameras:
            cameras[name] = _camera_array(kdb, episode_images, record.camera, record)
    return Group({**attributes, "position": position}, {
        "states": field_array("state", "state", int(entry.state_dim)),
        "actions": field_array("action", "action", int(entry.action_dim)),
        "rewards": field_array("reward", "reward", None),
        "terminals": field_array("terminal", "is_terminal", None),
        "images": Group({}, cameras),
    })


def _camera_array(kdb: KdbFile, images: Any, camera: str, record: Any) -> Array:
    image_shape = (int(record.height), int(record.width), int(record.channels))

    def read(coords: tuple[int, ...]) -> np.ndarray:
        frame = coords[0]
        try:
            found = images.record(frame, camera)
        except KeyError:  # this frame has no image of the camera: zeros of the first frame's size, if it holds
            check_decoded_size(record.width, record.height, record.channels, record.length, record.compressed,
                               f"episode {images.position} camera {camera!r} image", record.offset)
            return np.zeros((1, *image_shape), dtype=np.uint8)
        pixels = kdb.decode_image(found)
        if pixels.shape != image_shape:
            raise UnsupportedError(f"arrayio: kdb episode {images.position} camera {camera!r} changes "
                                   f"shape at frame {frame}: {pixels.shape}, not {image_shape}")
        return pixels[np.newaxis]

    chunk = (1, *(max(size, 1) for size in image_shape))  # a zarr chunk has no empty side (0 channels is valid)
    return Array((images.num_frames, *image_shape), np.dtype(np.uint8), chunk,
                 ("frame", "height", "width", "channel"), {"camera": camera}, read,
                 why_computed="camera frames are JPEG/PNG (or raw) records spread through the file, one per frame")
