"""A picture of one episode: state and action curves over time above a strip
of camera frames (matplotlib with the Agg backend; no display needed)."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from .._edge import open_output
from .._optional import require
from ..kdb import KdbFile

# Beyond this many dimensions the curves stop being readable one by one; the legend is dropped.
LEGEND_LIMIT = 10


def episode_png(kdb: KdbFile, position: int, target: Any, *, frames: int = 8, dpi: int = 110) -> None:
    """Draw episode ``position`` (curves + ``frames`` evenly spaced camera frames per camera) to a PNG."""
    matplotlib = require("matplotlib", "kdb show --png")
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    episode = kdb.read_episode(position)
    meta = episode.meta
    if not len(episode):
        raise ValueError(f"kdb: episode {meta.episode_id} has no frames to draw")
    images = episode.images
    assert images is not None  # read_episode reads images by default
    cameras = images.cameras
    count = max(1, min(frames, len(episode)))
    picks = np.unique(np.linspace(0, len(episode) - 1, count).round().astype(int))
    seconds = np.arange(len(episode)) / meta.fps if meta.fps > 0 else np.arange(len(episode))
    axis_label = "time (s)" if meta.fps > 0 else "frame"
    rows = 2 + len(cameras)
    figure = plt.figure(figsize=(max(8.0, 1.3 * len(picks)), 2.6 * 2 + 1.5 * len(cameras)), dpi=dpi,
                        layout="constrained")
    grid = figure.add_gridspec(rows, len(picks), height_ratios=[2.6, 2.6] + [1.5] * len(cameras))
    success = {None: "unknown", True: "yes", False: "no"}[meta.success]
    figure.suptitle(f"episode {meta.episode_id} — {meta.task or 'no task'} ({meta.embodiment or 'no embodiment'}), "
                    f"{meta.num_frames} frames at {meta.fps:g} fps, success: {success}", fontsize=11)
    for row, (name, values) in enumerate((("state", episode.states), ("action", episode.actions))):
        axes = figure.add_subplot(grid[row, :])
        for dim in range(values.shape[1]):
            axes.plot(seconds, values[:, dim], linewidth=1.2, label=f"{name}[{dim}]")
        for pick in picks:
            axes.axvline(seconds[pick], color="0.85", linewidth=0.8, zorder=0)
        axes.set_ylabel(f"{name} ({values.shape[1]}-d)")
        axes.set_xlabel(axis_label)
        axes.set_xlim(seconds[0], seconds[-1] if len(seconds) > 1 else seconds[0] + 1)
        axes.grid(alpha=0.3)
        if 0 < values.shape[1] <= LEGEND_LIMIT:
            axes.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=7, frameon=False)
    for offset, camera in enumerate(cameras):
        for column, pick in enumerate(picks):
            axes = figure.add_subplot(grid[2 + offset, column])
            image = images.frame(int(pick), [camera]).get(camera)
            if image is not None:
                axes.imshow(image[:, :, 0] if image.shape[2] == 1 else image[:, :, :3],
                            cmap="gray" if image.shape[2] == 1 else None)
            axes.set_xticks([])
            axes.set_yticks([])
            if column == 0:
                axes.set_ylabel(camera, fontsize=9)
            axes.set_title(f"t={seconds[pick]:.2f}s" if meta.fps > 0 else f"frame {pick}", fontsize=8)
    with open_output(os.fspath(target)) as stream:
        figure.savefig(stream, format="png")
    plt.close(figure)
