"""``FrameDataset[item]`` for the usual item (JPEG or raw images at the current frame) in scalars where the
batch path works on arrays.

The batch path's fixed cost per call, ~60 small array operations meant for hundreds of frames, was half
of a 224x224 JPEG's decode for one item. Anything else it must do or say (a window of images, a missing,
PNG or damaged image) it still does: :func:`one_item` then answers None.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..kdb import check_image_record, decode_jpeg_into
from .torch_batch import batch_tensor, channels_first, scratch_pixels, to_float

STEP_FIELDS = {"state": "state", "action": "action", "reward": "reward", "terminal": "is_terminal"}


def one_item(dataset: Any, item: int) -> dict[str, Any] | None:
    """Item ``item`` of FrameDataset ``dataset`` (decoding images) as its batch path makes it, or None where
    that path must make it."""
    shards = dataset.shards
    frames = shards.check_frames((item,))
    episodes = shards.locate(frames)
    episode = int(episodes[0])
    local = int(frames[0]) - int(shards.first_frames[episode])
    images = [output for output in dataset.outputs if output.field not in STEP_FIELDS]
    if any(output.windowed for output in images):
        return None
    shards.prefetch(episodes, images=bool(images))
    steps = shards.load_steps(episodes)
    table = shards.load_images(episodes) if images else None
    first_row = int(steps.start[episode])
    column = steps.columns["steps"]
    # The keys in the batch path's order: the step fields first, then the images and pad masks.
    out: dict[str, Any] = {output.key: None for output in dataset.outputs if output.field in STEP_FIELDS}
    for output in dataset.outputs:
        if output.field not in STEP_FIELDS:
            image = _decoded(dataset, table, episode, local, output.field[len("image."):])
            if image is None:
                return None
            out[output.key] = image
            continue
        field = column[STEP_FIELDS[output.field]]  # a view of the rows, this process's cache
        if output.windowed:
            rows, pad = dataset._rows(output, episodes, frames - shards.first_frames[episodes],
                                      shards.episode_frames[episodes])
            values = field[first_row + rows[0]]  # the index copies: one contiguous array of the window
        else:
            values = np.array(field[first_row + local])  # a copy of its own, not a view into the cache
        out[output.key] = torch.from_numpy(np.asarray(values != 0) if output.field == "terminal" else values)
        if output.pad_key is not None:
            out[output.pad_key] = torch.from_numpy(pad[0])
    out.update(episode=torch.tensor(int(shards.episode_position[episode])), frame=torch.tensor(local),
               shard=torch.tensor(int(shards.episode_shard[episode])), index=torch.tensor(int(frames[0])))
    return out


def _decoded(dataset: Any, table: Any, episode: int, local: int, camera: str) -> torch.Tensor | None:
    """The (C, H, W) image of ``camera`` at frame ``local`` of global ``episode`` (its image records in
    ``table``), from a JPEG or raw pixels; None for anything else."""
    shards = dataset.shards
    records = table.columns.get(camera)
    if records is None:
        return None
    record = records[int(table.start[episode]) + local]
    height, width, channels = int(record["height"]), int(record["width"]), int(record["channels"])
    offset, length = int(record["offset"]), int(record["length"])
    raw = not record["format"]
    if length < 0 or not raw and channels not in (1, 3):
        return None
    check_image_record(width, height, channels, length, not raw, f"image {camera!r}", offset)
    data = shards.file(int(shards.episode_shard[episode])).image_bytes((offset,), (length,))[0]
    shape = (height, width, channels)
    floats = dataset.image_format == "float"
    pixels = batch_tensor(shape, torch.float32 if floats else torch.uint8)
    if raw:  # the pixels themselves (their size checked above)
        decoded = np.frombuffer(data, np.uint8).reshape(shape)
    else:  # floats: decoded where it stays in the CPU cache for the conversion
        decoded = scratch_pixels(shape) if floats else pixels.numpy()
        if not decode_jpeg_into(data, decoded):
            return None
    if floats:
        to_float(decoded, pixels.numpy())
    elif raw:
        pixels.numpy()[...] = decoded
    return channels_first(pixels)
