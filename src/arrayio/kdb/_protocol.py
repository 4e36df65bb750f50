"""The registry protocol of kdb: open, info, validate, entries, demo."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .._readers import entries_of, info_of, problems_of
from .._sources import resolve
from ..errors import ArrayIOError, Problem
from ._reader import KdbFile, open_file
from ._writer import Writer


def open(path: Any, *, on_bad_image: str = "raise",  # noqa: A001 - mirrors arrayio.open
         storage_options: dict | None = None) -> KdbFile:
    """Open a .kdb file (memory-mapped for paths, read in ranges for URLs); ``on_bad_image="skip"`` warns
    instead of raising."""
    return open_file(resolve(path, storage_options) if storage_options else path, on_bad_image=on_bad_image)


def info(path: Any) -> dict:
    """Episodes, frames, dims, cameras, embodiments and tasks of a .kdb file."""
    return info_of(open, path)


def validate(path: Any, *, decode_images: bool = True) -> list[Problem]:
    """Every problem found in a .kdb file (empty list: valid); never raises for a bad file."""
    return problems_of(open, path, decode_images=decode_images)


def entries(path: Any) -> list[dict]:
    """One row per episode: id, frames, dims, fps, success, total reward, embodiment, task."""
    return entries_of(open, path)


def demo(folder: Path) -> Path:
    """Write a small two-camera sample, read it back, check it and return its path."""
    path = Path(folder) / "demo.kdb"
    rng = np.random.default_rng(7)
    written = []
    with Writer(path, compress="png") as writer:
        for episode in range(3):
            frames = 5 + episode
            states = rng.standard_normal((frames, 4)).astype(np.float32)
            actions = rng.standard_normal((frames, 2)).astype(np.float32)
            front = rng.integers(0, 256, (frames, 8, 8, 3), dtype=np.uint8)
            writer.add_episode(states, actions, images={"front": front}, embodiment="demo-arm",
                               task=f"reach target {episode}", fps=10.0, success=episode % 2 == 0,
                               terminals=np.arange(frames) == frames - 1)
            written.append((states, actions, front))
    with open(path) as kdb:
        for position, (states, actions, front) in enumerate(written):
            episode = kdb.read_episode(position)
            if not (np.array_equal(episode.states, states) and np.array_equal(episode.actions, actions)
                    and np.array_equal(episode.images["front"], front)):
                raise ArrayIOError(f"kdb demo: episode {position} did not read back equal")
    return path
