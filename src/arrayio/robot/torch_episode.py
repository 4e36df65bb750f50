"""Whole episodes of .kdb shards as a PyTorch dataset (re-exported by :mod:`arrayio.robot.torch`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

try:
    import torch
    from torch.utils.data import Dataset
except ModuleNotFoundError as error:  # say which extra installs it
    from .._optional import missing

    raise missing("torch", "arrayio.robot.torch_episode") from error

from ._arguments import camera_names, item_index
from ._shards import ShardSet, reading
from .torch_batch import check_image_format, image_tensor


class EpisodeDataset(Dataset):
    """Whole episodes of one or many shards: ``states``, ``actions``, ``rewards``, ``terminals``
    (frames, ...) tensors, ``image.<camera>`` (frames, C, H, W) and the metadata fields.

    ``source`` and ``storage_options`` are as for :class:`FrameDataset`. Episodes differ in length, so
    batch them with ``batch_size=1`` or a custom collate.
    """

    def __init__(self, source: Any, cameras: Sequence[str] | None = None, *, image_format: str = "float",
                 on_bad_image: str = "raise", storage_options: dict | None = None) -> None:
        check_image_format(image_format)
        self.image_format = image_format
        named = None if cameras is None else camera_names(cameras)
        self.shards = ShardSet(source, on_bad_image=on_bad_image, storage_options=storage_options)
        self.cameras = self.shards.cameras if named is None else named

    def __len__(self) -> int:
        return self.shards.num_episodes

    def __getitem__(self, item: int) -> dict[str, Any]:
        item = item_index(item, "an episode")
        if not -len(self) <= item < len(self):
            raise IndexError(f"kdb: episode {item} is outside 0..{len(self) - 1}")
        item %= len(self)
        shards = self.shards
        kdb = shards.file(int(shards.episode_shard[item]))
        with reading(kdb):  # the images decode here, on access
            episode = kdb.read_episode(int(shards.episode_position[item]))
            meta = episode.meta
            sample: dict[str, Any] = {
                "states": torch.from_numpy(np.array(episode.states)),
                "actions": torch.from_numpy(np.array(episode.actions)),
                "rewards": torch.from_numpy(np.array(episode.rewards)),
                "terminals": torch.from_numpy(episode.terminals != 0),
                "episode_id": meta.episode_id, "embodiment": meta.embodiment, "task": meta.task, "fps": meta.fps,
                "success": -1 if meta.success is None else int(meta.success),
                "shard": int(shards.episode_shard[item]),
            }
            images = episode.images
            assert images is not None  # read_episode reads images by default
            for camera in self.cameras:
                sample[f"image.{camera}"] = image_tensor(np.asarray(images[camera]), self.image_format)
        return sample

    def __getitems__(self, items: Sequence[int]) -> list[dict[str, Any]]:
        """The episodes ``items`` in one call."""
        return [self[int(item)] for item in items]
