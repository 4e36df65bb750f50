"""Fuzz kdb (.kdb): detect, open, info, validate, entries, every episode and every frame with images decoded."""

from __future__ import annotations

import io
import warnings

from _common import read_mapped

from arrayio import kdb

FORMAT = "kdb"


def _read(file: kdb.KdbFile) -> None:
    """Every episode's metadata, steps and frames (images decoded), by position, by id and by global frame."""
    with file:
        for position in range(len(file)):
            meta = file.read_meta(position)
            episode = file.read_episode(position)
            episode.states.sum()
            episode.actions.sum()
            episode.rewards.sum()
            episode.terminals.sum()
            file.read_episode_actions_only(position)
            file.position_of(meta.episode_id)
            images = episode.images
            for frame in range(len(episode)):
                file.read_frame(position, frame)
                for record in images.records(frame)[:1]:
                    images.raw(frame, record.camera)
            _ = images.cameras
        if file.num_frames:
            file.locate(0)
            file.locate(file.num_frames - 1)


def exercise(path: str, data: bytes) -> None:
    """Every public read path of kdb over one input."""
    if read_mapped(path, data, FORMAT, kdb.open, _read):
        rows = kdb.entries(path)
        with kdb.open(path) as reader:
            for row in rows[:1]:
                for _ in reader.cat(row["name"]):
                    pass
    _read(kdb.open(io.BytesIO(data)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with kdb.open(data, on_bad_image="skip") as file:
            for position in range(len(file)):
                for frame in range(file.read_meta(position).num_frames):
                    file.read_frame(position, frame)
