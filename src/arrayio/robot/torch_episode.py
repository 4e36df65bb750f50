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
from ._shards import ShardSet, prefetch_together
from .torch_batch import check_image_format, image_tensor


class EpisodeDataset(Dataset):
    """Whole episodes of one or many shards: ``states``, ``actions``, ``rewards``, ``terminals``
    (frames, ...) tensors, ``image.<camera>`` (frames, C, H, W) and the metadata fields.

    ``source`` and ``storage_options`` are as for :class:`FrameDataset`. Episodes differ in length, so
    batch them with ``batch_size=1`` or a custom collate. Over remote shards, a DataLoader whose
    ``batch_sampler`` is a :class:`ReadAheadSampler` reads each process's next episodes ahead.
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
        return self._read(self._episode(item))

    def __getitems__(self, items: Sequence[int]) -> list[dict[str, Any]]:
        """The episodes ``items`` in one call. From remote shards their sections are fetched together (one
        round trip for all), and where ``items`` is a :class:`ReadAheadBatch` the episodes of the batches
        its process reads next are fetched in the background meanwhile."""
        episodes = [self._episode(item) for item in items]
        shards = self.shards
        shards.wait_read_ahead()  # this batch's bytes may be on their way: not asked for twice
        ahead = getattr(items, "ahead", None)
        if ahead is not None and shards.remote:
            try:
                later = np.setdiff1d(np.array([self._episode(item) for item in ahead], np.int64), episodes)
            except (TypeError, IndexError):  # the batch that holds them will say what is wrong, not this one
                later = np.zeros(0, np.int64)
            shards.read_ahead_episodes(later, images=True, meta=True)
        prefetch_together([(shards, np.unique(episodes))], images=True, meta=True)
        return [self._read(episode) for episode in episodes]

    def _episode(self, item: Any) -> int:
        """The global episode number of index ``item`` (negative from the end); IndexError outside."""
        item = item_index(item, "an episode")
        if not -len(self) <= item < len(self):
            raise IndexError(f"kdb: episode {item} is outside 0..{len(self) - 1}")
        return item % len(self)

    def _read(self, episode: int) -> dict[str, Any]:
        shards = self.shards
        kdb = shards.file(int(shards.episode_shard[episode]))
        read = kdb.read_episode(int(shards.episode_position[episode]))
        meta = read.meta
        sample: dict[str, Any] = {
            "states": torch.from_numpy(np.array(read.states)),
            "actions": torch.from_numpy(np.array(read.actions)),
            "rewards": torch.from_numpy(np.array(read.rewards)),
            "terminals": torch.from_numpy(read.terminals != 0),
            "episode_id": meta.episode_id, "embodiment": meta.embodiment, "task": meta.task, "fps": meta.fps,
            "success": -1 if meta.success is None else int(meta.success),
            "shard": int(shards.episode_shard[episode]),
        }
        images = read.images
        assert images is not None  # read_episode reads images by default
        for camera in self.cameras:
            sample[f"image.{camera}"] = image_tensor(np.asarray(images[camera]), self.image_format)
        return sample
