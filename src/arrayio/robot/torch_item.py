"""``FrameDataset[item]`` for the usual item (JPEG or raw images at the current frame) in scalars where the
batch path works on arrays.

The batch path's fixed cost per call, ~60 small array operations meant for hundreds of frames, was half
of a 224x224 JPEG's decode for one item. Here an item costs a few Python operations per key, and the
per-dataset work (which keys, in which order, from which fields) is done once, in :class:`ItemPlan`. Anything
else it must do or say (a window of images, a missing, PNG or damaged image) it still does:
:func:`one_item` then answers None.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..kdb import check_image_record, decode_jpeg_into
from .torch_batch import batch_tensor, channels_first, scratch_pixels, to_float

STEP_FIELDS = {"state": "state", "action": "action", "reward": "reward", "terminal": "is_terminal"}


class ItemPlan:
    """A FrameDataset's outputs as :func:`one_item` makes them, worked out once per dataset."""

    def __init__(self, outputs: Sequence[Any]) -> None:
        # (key, field of the step rows, fixed frame offsets of a window, window in seconds?, pad key (None:
        # no window), terminal?)
        self.steps = [(output.key, STEP_FIELDS[output.field],
                       [] if output.frames is None else output.frames.tolist(), output.seconds is not None,
                       output.pad_key, output.field == "terminal")
                      for output in outputs if output.field in STEP_FIELDS]
        images = [output for output in outputs if output.field not in STEP_FIELDS]
        # After the step keys, the batch path's order: images and pad masks as the outputs name them
        # ((key, camera), camera None for a pad mask).
        self.tail = [(output.key, output.field[len("image."):]) if output.field not in STEP_FIELDS
                     else (output.pad_key, None) for output in outputs
                     if output.field not in STEP_FIELDS or output.pad_key is not None]
        self.images = bool(images)
        self.declines = any(output.windowed for output in images)


def one_item(dataset: Any, item: int) -> dict[str, Any] | None:
    """Item ``item`` of FrameDataset ``dataset`` (decoding images) as its batch path makes it, or None where
    that path must make it."""
    plan: ItemPlan = dataset.item_plan
    if plan.declines:
        return None
    shards = dataset.shards
    frame = shards.frame_number(item)
    episode = shards.episode_of(frame)
    local = frame - shards.first_frame(episode)
    steps, table = shards.episode_rows(episode, images=plan.images)
    first_row = int(steps.start[episode])
    column = steps.columns["steps"]  # this process's cache of the rows: values are copied out of it
    out: dict[str, Any] = {}
    pads: dict[str, torch.Tensor] = {}
    for key, name, offsets, in_seconds, pad_key, terminal in plan.steps:
        field = column[name]
        if pad_key is None:
            values = np.array(field[first_row + local])
        else:
            if in_seconds:
                offsets = dataset._window_frames(float(shards.episode_fps[episode]))[key].tolist()
            last = int(shards.episode_frames[episode]) - 1
            wanted = [local + offset for offset in offsets]
            rows = [min(max(asked, 0), last) for asked in wanted]  # the edge frame repeated past the episode
            values = field[[first_row + row for row in rows]]  # the index copies
            pads[pad_key] = torch.from_numpy(np.array([row != asked for row, asked in zip(rows, wanted)]))
        out[key] = torch.from_numpy(np.asarray(values != 0) if terminal else values)
    for key, camera in plan.tail:
        if camera is None:
            out[key] = pads[key]
            continue
        image = _decoded(dataset, table, episode, local, camera)
        if image is None:
            return None
        out[key] = image
    out.update(episode=_int64(shards.episode_position[episode]), frame=_int64(local),
               shard=_int64(shards.episode_shard[episode]), index=_int64(frame))
    return out


def _int64(value: Any) -> torch.Tensor:
    """A 0-d int64 tensor (through numpy: a quarter of torch.tensor's cost)."""
    return torch.from_numpy(np.array(value, np.int64))


def _decoded(dataset: Any, table: Any, episode: int, local: int, camera: str) -> torch.Tensor | None:
    """The (C, H, W) image of ``camera`` at frame ``local`` of global ``episode`` (its image records in
    ``table``), from a JPEG or raw pixels; None for anything else."""
    shards = dataset.shards
    records = table.columns.get(camera)
    if records is None:
        return None
    # One record's fields as Python ints in one call, in IMAGE_TABLE_DTYPE's order.
    offset, length, height, width, channels, stored = records[int(table.start[episode]) + local].item()
    raw = not stored
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
