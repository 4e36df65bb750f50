"""The registry protocol of kdb: open, info, validate, entries, cat, demo."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._readers import entries_of, info_of, problems_of
from .._sources import resolve
from ..errors import ArrayIOError, Problem
from ._errors import EpisodeIdNotFound
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


def cat(path: Any, name: str, numbers: bool = False) -> Iterator[str]:
    """The frames of episode id ``name`` as tab-separated lines: frame, reward, terminal, state, action, images
    (numbers already: ``numbers`` changes nothing here)."""
    try:
        episode_id = int(name)
    except ValueError:
        raise EpisodeIdNotFound(f"kdb: {name!r} is not an episode id (ids are integers; see `arrayio ls`)") from None
    with open(path) as kdb:
        position = kdb.position_of(episode_id)
        episode = kdb.read_episode(position)
        meta = episode.meta
        yield (f"# episode {meta.episode_id} (position {position}): {meta.num_frames} frames, "
               f"embodiment {meta.embodiment!r}, task {meta.task!r}, fps {meta.fps:g}, success {meta.success}, "
               f"total_reward {meta.total_reward}")
        yield "frame\treward\tterminal\tstate\taction\timages"
        for frame in range(len(episode)):
            images = ", ".join(f"{record.camera}:{record.width}x{record.height}x{record.channels}"
                               f"{' compressed' if record.compressed else ' raw'} {record.length}B"
                               for record in kdb.image_records(position, frame))
            yield "\t".join([str(frame), f"{float(episode.rewards[frame]):g}", str(int(episode.terminals[frame])),
                             " ".join(f"{value:g}" for value in episode.states[frame].tolist()),
                             " ".join(f"{value:g}" for value in episode.actions[frame].tolist()),
                             images or "-"])


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
