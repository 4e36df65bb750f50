"""PyTorch datasets over .kdb files (the only module of arrayio that imports torch).

``FrameDataset`` is a map-style dataset over every frame of a file, with
windows in the spirit of LeRobot's ``delta_timestamps``: ``history`` past
states and ``horizon`` future actions, clamped at the episode edges and marked
by ``*_is_pad`` masks. ``EpisodeDataset`` yields whole episodes.

Both pickle as their path and options only: each DataLoader worker maps the
file itself the first time it reads (a map is never shared across processes).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from ._reader import KdbFile, open_file

__all__ = ["EpisodeDataset", "FrameDataset"]

IMAGE_FORMATS = ("float", "uint8")


class _LazyFile:
    """Opens the .kdb file once per process and drops the map when pickled."""

    def __init__(self, path: Any, on_bad_image: str) -> None:
        self.path = os.fspath(path)
        self.on_bad_image = on_bad_image
        self._file: KdbFile | None = None
        self._pid: int | None = None

    @property
    def file(self) -> KdbFile:
        """This process's open file (opened on first use, again after a fork)."""
        if self._file is None or self._pid != os.getpid():
            self._file = open_file(self.path, on_bad_image=self.on_bad_image)
            self._pid = os.getpid()
        return self._file

    def __getstate__(self) -> dict:
        return {"path": self.path, "on_bad_image": self.on_bad_image}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"], state["on_bad_image"])


def _image_tensor(pixels: np.ndarray, image_format: str) -> torch.Tensor:
    """(..., H, W, C) uint8 -> (..., C, H, W) tensor, float32 in [0, 1] or uint8 (one numpy pass)."""
    leading = tuple(range(pixels.ndim - 3))
    channels_first = pixels.transpose(*leading, pixels.ndim - 1, pixels.ndim - 3, pixels.ndim - 2)
    if image_format == "float":
        return torch.from_numpy(np.multiply(channels_first, np.float32(1 / 255), dtype=np.float32))
    return torch.from_numpy(np.ascontiguousarray(channels_first))


def _first_cameras(kdb: KdbFile) -> list[str]:
    """The cameras of the first frame of the first non-empty episode (none for an empty file)."""
    for position in range(len(kdb)):
        if kdb.entry(position).num_frames:
            return [record.camera for record in kdb.image_records(position, 0)]
    return []


def _check_image_format(image_format: str) -> None:
    if image_format not in IMAGE_FORMATS:
        raise ValueError(f"kdb: image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")


class FrameDataset(Dataset):
    """Every frame of a .kdb file: state, action window, optional state history and camera images.

    An item is a dict: tensors ``state`` (state_dim,), ``action`` (horizon,
    action_dim) with ``action_is_pad`` (horizon,), ``state_history`` (history,
    state_dim) with ``state_history_is_pad`` when ``history > 0``, and
    ``image.<camera>`` (C, H, W) for each camera in ``cameras`` (default: the
    cameras of the first frame; ``[]`` for none); scalars ``reward`` (float32),
    ``terminal`` (bool), ``episode`` and ``frame``, which the DataLoader collates into tensors.
    """

    def __init__(self, path: Any, cameras: Sequence[str] | None = None, history: int = 0, horizon: int = 1, *,
                 image_format: str = "float", on_bad_image: str = "raise") -> None:
        if history < 0 or horizon < 1:
            raise ValueError(f"kdb: need history >= 0 and horizon >= 1, got history={history}, horizon={horizon}")
        _check_image_format(image_format)
        self.history = int(history)
        self.horizon = int(horizon)
        self.image_format = image_format
        self._lazy = _LazyFile(path, on_bad_image)
        kdb = self._lazy.file
        self.cameras = _first_cameras(kdb) if cameras is None else list(cameras)
        self.first_frames = kdb.first_frames.copy()

    def __len__(self) -> int:
        return int(self.first_frames[-1])

    def __getitem__(self, item: int) -> dict[str, torch.Tensor]:
        kdb = self._lazy.file
        if item < 0:
            item += len(self)
        position, frame = kdb.locate(int(item))
        steps = kdb.steps(position)
        last = len(steps) - 1
        future = np.arange(frame, frame + self.horizon)
        sample = {
            "state": torch.from_numpy(np.array(steps["state"][frame])),
            "action": torch.from_numpy(np.array(steps["action"][np.minimum(future, last)])),
            "action_is_pad": torch.from_numpy(future > last),
            "reward": steps["reward"][frame],
            "terminal": steps["is_terminal"][frame] != 0,
            "episode": position,
            "frame": frame,
        }
        if self.history:
            past = np.arange(frame - self.history, frame)
            sample["state_history"] = torch.from_numpy(np.array(steps["state"][np.maximum(past, 0)]))
            sample["state_history_is_pad"] = torch.from_numpy(past < 0)
        if self.cameras:
            images = kdb.frame_images(position, frame, self.cameras, kdb.on_bad_image)
            for camera in self.cameras:
                if camera not in images:
                    raise KeyError(f"kdb: episode {position} frame {frame} has no image of camera {camera!r}")
                sample[f"image.{camera}"] = _image_tensor(images[camera], self.image_format)
        return sample


class EpisodeDataset(Dataset):
    """Whole episodes: ``states``, ``actions``, ``rewards``, ``terminals`` (frames, ...) tensors,
    ``image.<camera>`` (frames, C, H, W) and the metadata fields.

    Episodes differ in length, so batch them with ``batch_size=1`` or a custom collate.
    """

    def __init__(self, path: Any, cameras: Sequence[str] | None = None, *, image_format: str = "float",
                 on_bad_image: str = "raise") -> None:
        _check_image_format(image_format)
        self.image_format = image_format
        self._lazy = _LazyFile(path, on_bad_image)
        kdb = self._lazy.file
        self.cameras = _first_cameras(kdb) if cameras is None else list(cameras)
        self._length = len(kdb)

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, item: int) -> dict[str, Any]:
        kdb = self._lazy.file
        episode = kdb.read_episode(item)
        meta = episode.meta
        sample: dict[str, Any] = {
            "states": torch.from_numpy(np.array(episode.states)),
            "actions": torch.from_numpy(np.array(episode.actions)),
            "rewards": torch.from_numpy(np.array(episode.rewards)),
            "terminals": torch.from_numpy(episode.terminals != 0),
            "episode_id": meta.episode_id, "embodiment": meta.embodiment, "task": meta.task, "fps": meta.fps,
            "success": -1 if meta.success is None else int(meta.success),
        }
        for camera in self.cameras:
            sample[f"image.{camera}"] = _image_tensor(np.asarray(episode.images[camera]), self.image_format)
        return sample
