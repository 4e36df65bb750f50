"""kdb (KINO 0.1): robot-learning episodes in one memory-mappable file.

    with arrayio.kdb.Writer("demo.kdb", compress="jpeg") as writer:
        writer.add_episode(states, actions, images={"front": frames}, task="pick", fps=10)
    with arrayio.kdb.open("demo.kdb") as f:
        episode = f.read_episode(0)          # zero-copy states/actions, lazy images
        frame = f.read_frame(0, 17)          # one frame, images decoded

The byte layout and every decision the original spec leaves open are in
``docs/formats/kdb.md``; the PyTorch datasets live in ``arrayio.kdb.torch``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .._sources import resolve
from ..errors import ArrayIOError
from ._images import EncodedImage
from ._layout import (
    ERRORS,
    FORMAT_NAME,
    HEADER,
    VERSION_MINOR,
    BadMagic,
    EpisodeIdNotFound,
    EpisodeMeta,
    EpisodeNotFound,
    ImageDecodeError,
    InvalidUtf8,
    KinoError,
    UnexpectedEof,
    UnsupportedVersion,
)
from .reader import Episode, EpisodeImages, Frame, ImageRecord, KdbFile, open_file
from .writer import Writer

__all__ = [
    "ERRORS",
    "FORMAT_NAME",
    "BadMagic",
    "EncodedImage",
    "Episode",
    "EpisodeIdNotFound",
    "EpisodeImages",
    "EpisodeMeta",
    "EpisodeNotFound",
    "Frame",
    "ImageDecodeError",
    "ImageRecord",
    "InvalidUtf8",
    "KdbFile",
    "KinoError",
    "UnexpectedEof",
    "UnsupportedVersion",
    "Writer",
    "cat",
    "demo",
    "entries",
    "info",
    "open",
    "validate",
]


def open(path: Any, *, on_bad_image: str = "raise",  # noqa: A001 - mirrors arrayio.open
         storage_options: dict | None = None) -> KdbFile:
    """Open a .kdb file (memory-mapped for paths, read in ranges for URLs); ``on_bad_image="skip"`` warns
    instead of raising."""
    return open_file(resolve(path, storage_options) if storage_options else path, on_bad_image=on_bad_image)


def info(path: Any) -> dict:
    """Episodes, frames, dims, cameras, embodiments and tasks of a .kdb file."""
    with open(path) as kdb:
        metas = [kdb.read_meta(position) for position in range(len(kdb))]
        cameras: dict[str, None] = {}
        for position in range(len(kdb)):
            if metas[position].num_frames:
                for record in kdb.image_records(position, 0):
                    cameras.setdefault(record.camera, None)
        dims = sorted({(meta.state_dim, meta.action_dim) for meta in metas})
        successes = [meta.success for meta in metas if meta.success is not None]
        facts = {
            "summary": f"{len(kdb)} episodes, {kdb.num_frames} frames, state/action dims "
                       f"{', '.join(f'{s}/{a}' for s, a in dims) or '-'}, cameras {', '.join(cameras) or 'none'}",
            "version": kdb.version,
            "episodes": len(kdb),
            "frames": kdb.num_frames,
            "created_timestamp": int(kdb.header.created_timestamp),
            "state_dims": sorted({s for s, _ in dims}),
            "action_dims": sorted({a for _, a in dims}),
            "cameras": list(cameras),
            "embodiments": sorted({meta.embodiment for meta in metas}),
            "tasks": sorted({meta.task for meta in metas}),
            "fps": sorted({meta.fps for meta in metas if not math.isnan(meta.fps)}),
            "success_rate": (sum(successes) / len(successes)) if successes else None,
            "file_bytes": kdb.source.size,
        }
    return facts


def validate(path: Any, *, decode_images: bool = True) -> list[str]:
    """Every problem found in a .kdb file (empty list: valid); never raises for a bad file."""
    try:
        kdb = open(path)
    except ArrayIOError as error:
        return [str(error)]
    problems = []
    with kdb:
        reserved = HEADER.nonzero_reserved(kdb.source.view(0, HEADER.size, "header"))
        if reserved and kdb.header.version_minor <= VERSION_MINOR:
            problems.append(f"kdb: header.reserved at byte {HEADER.offsets['reserved']}: expected zeros")
        for position in range(len(kdb)):
            problems.extend(_episode_problems(kdb, position, decode_images))
    return problems


def _episode_problems(kdb: KdbFile, position: int, decode_images: bool) -> list[str]:
    problems = []
    try:
        meta = kdb.read_meta(position)
        if meta.num_frames == 0:
            problems.append(f"kdb: episode {position} index.num_frames: expected at least 1 frame, found 0")
        kdb.steps(position)
        for frame in range(meta.num_frames):
            for record in kdb.image_records(position, frame):
                if decode_images or not record.compressed:
                    kdb.decode_image(record)
        first, end = kdb.frame_offset(position, 0), kdb.frame_offset(position, meta.num_frames)
        stored = int(kdb.index["images_length"][position])
        if end - first != stored:
            problems.append(f"kdb: episode {position} index.images_length: expected {end - first} bytes of image "
                            f"records, found {stored}")
    except ImageDecodeError as error:
        problems.append(f"{error} (episode {position})")
    except ArrayIOError as error:
        problems.append(str(error))
    return problems


def entries(path: Any) -> list[dict]:
    """One row per episode: id, frames, dims, fps, success, total reward, embodiment, task."""
    with open(path) as kdb:
        rows = []
        for position in range(len(kdb)):
            meta = kdb.read_meta(position)
            rows.append({"name": str(meta.episode_id), "frames": meta.num_frames, "state_dim": meta.state_dim,
                         "action_dim": meta.action_dim, "fps": meta.fps, "success": meta.success,
                         "total_reward": meta.total_reward, "embodiment": meta.embodiment, "task": meta.task})
    return rows


def cat(path: Any, name: str) -> Iterator[str]:
    """The frames of episode id ``name`` as tab-separated lines: frame, reward, terminal, state, action, images."""
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
